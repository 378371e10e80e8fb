package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAgentOptions(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		check func(a AgentOptions) bool
		err   string
	}{
		{"none", []string{"-S", "a"}, func(a AgentOptions) bool { return !a.any() }, ""},
		{"ephemeral", []string{"-S", "a", "--ephemeral"}, func(a AgentOptions) bool { return a.Ephemeral && a.any() }, ""},
		{"snapshot implies ephemeral", []string{"-S", "a", "--snapshot", "out.ext4"}, func(a AgentOptions) bool {
			return a.Ephemeral && a.Snapshot == "out.ext4"
		}, ""},
		{"audit timeout report", []string{"-S", "a", "--audit=l.jsonl", "--timeout", "1500ms", "--report", "r.json"}, func(a AgentOptions) bool {
			return a.Audit == "l.jsonl" && a.Timeout == 1500*time.Millisecond && a.Report == "r.json"
		}, ""},
		{"env repeatable", []string{"-S", "a", "--env", "A=1", "--env", "B=x=y", "--env", "C="}, func(a AgentOptions) bool {
			return reflect.DeepEqual(a.Env, []string{"A=1", "B=x=y", "C="})
		}, ""},
		{"bad timeout", []string{"-S", "a", "--timeout", "10"}, nil, "bad --timeout"},
		{"zero timeout", []string{"-S", "a", "--timeout", "0s"}, nil, "bad --timeout"},
		{"bad env", []string{"-S", "a", "--env", "NOEQUALS"}, nil, "bad --env"},
		{"empty env name", []string{"-S", "a", "--env", "=x"}, nil, "bad --env"},
		{"empty snapshot", []string{"-S", "a", "--snapshot", ""}, nil, "empty --snapshot"},
		{"empty audit", []string{"-S", "a", "--audit="}, nil, "empty --audit"},
		{"audit settings", []string{"-S", "a", "--audit", "l", "--audit-settings", strings.Repeat("0a", 32)}, func(a AgentOptions) bool {
			return a.AuditSettings == strings.Repeat("0a", 32) && a.any()
		}, ""},
		{"short audit settings", []string{"-S", "a", "--audit-settings", "0a0a"}, nil, "bad --audit-settings"},
		{"upper-case audit settings", []string{"-S", "a", "--audit-settings", strings.Repeat("0A", 32)}, nil, "bad --audit-settings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseImageArgs(c.args)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(o.Agent) {
				t.Fatalf("%+v", o.Agent)
			}
		})
	}
}

func TestEphemeralReadOnlyRefused(t *testing.T) {
	o, err := ParseImageArgs([]string{"-S", "a", "--ephemeral", "--read-only"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startAgent(o); err == nil || !strings.Contains(err.Error(), "--read-only") {
		t.Fatalf("got %v", err)
	}
}

func TestWithEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/"}
	got := withEnv(base, []string{"PATH=/x", "A=1", "HOME=/root", "A=2"})
	want := []string{"PATH=/x", "HOME=/root", "A=2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !reflect.DeepEqual(base, []string{"PATH=/bin", "HOME=/"}) {
		t.Fatal("withEnv changed its input")
	}
}

func TestKernelFileName(t *testing.T) {
	cases := []struct {
		path, name string
		sys        bool
	}{
		{"/proc/meminfo", "meminfo", false},
		{"/proc/sys/vm/overcommit_memory", "sys/vm/overcommit_memory", false},
		{"/sys/kernel/mm/transparent_hugepage/enabled", "kernel/mm/transparent_hugepage/enabled", true},
		{"/proc/self/status", "", false},
		{"/proc/thread-self/stat", "", false},
		{"/proc/1/environ", "", false},
		{"/proc/../etc/passwd", "", false},
		{"/sys/../etc/passwd", "", false},
		{"/proc/", "", false},
		{"/proc", "", false},
		{"/sys", "", false},
		{"/etc/passwd", "", false},
		{"/proc//meminfo", "", false},
	}
	for _, c := range cases {
		name, sys, err := kernelFileName(c.path)
		if (err == nil) != (c.name != "") || name != c.name || sys != c.sys {
			t.Errorf("%q: got %q %v, %v; want %q %v", c.path, name, sys, err, c.name, c.sys)
		}
	}
}
