// Package audit is kbox's tamper-evident run log: JSON Lines, one record a
// line, each record holding the SHA-256 of the line before it, so that an
// edited, inserted, removed or reordered record breaks the chain, and a
// truncated log no longer ends in the head hash printed at exit.
//
// A record is one JSON object on one line:
//
//	{"seq":1,"time":"2026-11-23T03:40:00.123456789Z","prev":"000…0","run":"5f0c…","type":"run_start","data":{...}}
//
// seq counts from 1 in the file; prev is the lowercase hex SHA-256 of the
// previous line's exact bytes without its newline (64 zeros for the first
// record); the head is the same hash of the last line.
package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Genesis is the prev of a log's first record.
var Genesis = strings.Repeat("0", 64)

// Record is one line of the log.
type Record struct {
	Seq  uint64 `json:"seq"`
	Time string `json:"time"`
	Prev string `json:"prev"`
	Run  string `json:"run,omitempty"`
	// Settings is the SHA-256 of the settings that bound the run (kbox
	// mcp's: its images, policy and network), when it has some.
	Settings string         `json:"settings_sha256,omitempty"`
	Type     string         `json:"type"`
	Data     map[string]any `json:"data,omitempty"`
}

// Hash is the hex SHA-256 of one line's bytes (without its newline).
func Hash(line []byte) string {
	s := sha256.Sum256(line)
	return hex.EncodeToString(s[:])
}

// Log appends records to a file opened with O_APPEND. Each Append locks
// the file (flock), reads its last line and writes one record with one
// write(2): several runs may share one log, their records interleaved in
// one chain (each names its run), and a crash leaves a valid prefix (at
// worst a last line without its newline, which Verify reports as such).
// A Log is safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	f        *os.File
	run      string
	settings string // every record's Settings
	head     string // of this Log's last record
	err      error
}

// maxLine bounds one record read back.
const maxLine = 16 << 20

// Open opens (or creates) the log at path. run names the run in each of
// its records. A log whose last line is not a whole record is refused.
func Open(path, run string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	l := &Log{f: f, run: run}
	if err := l.lock(); err != nil {
		f.Close()
		return nil, err
	}
	_, head, err := l.last()
	l.unlock()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	l.head = head
	return l, nil
}

func (l *Log) lock() error {
	for {
		err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("audit log: lock: %w", err)
			}
			return nil
		}
	}
}

func (l *Log) unlock() { unix.Flock(int(l.f.Fd()), unix.LOCK_UN) }

// last returns the seq and hash of the file's last record (0 and Genesis
// for an empty file), reading only the file's tail.
func (l *Log) last() (uint64, string, error) {
	fi, err := l.f.Stat()
	if err != nil {
		return 0, "", err
	}
	size := fi.Size()
	if size == 0 {
		return 0, Genesis, nil
	}
	for chunk := int64(64 << 10); ; chunk *= 2 {
		n := min(chunk, size)
		buf := make([]byte, n)
		if _, err := l.f.ReadAt(buf, size-n); err != nil {
			return 0, "", err
		}
		if buf[n-1] != '\n' {
			return 0, "", errors.New("its last record is cut short (no newline): refusing to extend it (run kbox audit verify)")
		}
		i := bytes.LastIndexByte(buf[:n-1], '\n')
		if i < 0 && n < size {
			if chunk > maxLine {
				return 0, "", errors.New("its last line is longer than any record")
			}
			continue
		}
		line := buf[i+1 : n-1]
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.Seq == 0 {
			return 0, "", errors.New("its last line is not a record: refusing to extend it (run kbox audit verify)")
		}
		return r.Seq, Hash(line), nil
	}
}

// SetSettings has every record appended from now on carry hash as its
// settings_sha256.
func (l *Log) SetSettings(hash string) {
	l.mu.Lock()
	l.settings = hash
	l.mu.Unlock()
}

// Append writes one record of type typ and returns its hash, the head.
func (l *Log) Append(typ string, data map[string]any) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.head, l.err
	}
	if l.f == nil {
		return l.head, errors.New("audit log closed")
	}
	if err := l.lock(); err != nil {
		l.err = err
		return l.head, err
	}
	defer l.unlock()
	seq, prev, err := l.last()
	if err != nil {
		l.err = fmt.Errorf("audit log: %w", err)
		return l.head, l.err
	}
	r := Record{Seq: seq + 1, Time: time.Now().UTC().Format(time.RFC3339Nano), Prev: prev, Run: l.run, Settings: l.settings, Type: typ, Data: data}
	line, err := json.Marshal(&r)
	if err != nil {
		l.err = fmt.Errorf("audit record: %w", err)
		return l.head, l.err
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		l.err = fmt.Errorf("audit log: %w", err)
		return l.head, l.err
	}
	l.head = Hash(line)
	return l.head, nil
}

// Head is the hash of this Log's last record (before any, the file's).
func (l *Log) Head() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// Close syncs the log to disk and closes it; it reports the first write
// error too.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return l.err
	}
	err := l.f.Sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if l.err != nil {
		return l.err
	}
	return err
}

// VerifyError names the first record that breaks the log.
type VerifyError struct {
	Line int // 1-based line number; 0 when the log as a whole is wrong
	Msg  string
}

func (e *VerifyError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("record at line %d: %s", e.Line, e.Msg)
}

// Summary is what a log that verified holds.
type Summary struct {
	Records int
	Head    string
	// HeadAt is the line whose hash is the head asked for (the last line
	// when none was given); records after it were appended later.
	HeadAt int
}

// Verify checks a whole log: every line a record, seq counting up from 1
// with no gap, each prev the hash of the line before. With head != "" the
// log must also hold the record whose hash is head: a log cut short, or
// whose last records were changed, no longer does.
func Verify(r io.Reader, head string) (Summary, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	prev := Genesis
	var s Summary
	headAt := 0
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return s, err
		}
		if b[len(b)-1] != '\n' {
			return s, &VerifyError{line, "cut short: the line has no newline (an interrupted write, or a truncated log)"}
		}
		b = b[:len(b)-1]
		if len(b) > maxLine {
			return s, &VerifyError{line, "longer than any record kbox writes"}
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return s, &VerifyError{line, fmt.Sprintf("not a record: %v", err)}
		}
		switch {
		case rec.Seq != uint64(line):
			return s, &VerifyError{line, fmt.Sprintf("seq %d where %d belongs: a record was inserted, removed or moved here", rec.Seq, line)}
		case rec.Prev != prev:
			what := "the record before it was changed, or a record was inserted or removed before it"
			if line == 1 {
				what = "the first record must hold " + Genesis[:8] + "…"
			}
			return s, &VerifyError{line, fmt.Sprintf("prev %.16s… is not the hash of the line before (%.16s…): %s", rec.Prev, prev, what)}
		case rec.Type == "":
			return s, &VerifyError{line, "no type"}
		}
		prev = Hash(b)
		s.Records = line
		if head != "" && prev == head {
			headAt = line
		}
	}
	s.Head = prev
	switch {
	case head == "":
		s.HeadAt = s.Records
	case headAt == 0:
		return s, &VerifyError{0, fmt.Sprintf("the head %s is the hash of no record: the log was truncated, or its last records changed (its last record, line %d, hashes to %s)", head, s.Records, prev)}
	default:
		s.HeadAt = headAt
	}
	return s, nil
}

// VerifyFile is Verify of the file at path.
func VerifyFile(path, head string) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	return Verify(f, head)
}
