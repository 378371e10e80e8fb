package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kbox-project/kbox/policy"
	"github.com/kbox-project/kbox/sessiondir"
)

// The operator decides, the agent asks: kbox mcp's flags (Config) bound
// every call, and the tools' arguments are requests within them. An image
// or a snapshot is a bare name in the operator's directory, never a host
// path; an agent's policy is TOML that only adds restrictions to the
// operator's; an agent may turn the operator's network off for a run,
// never on.

// Net is the network the operator gives every run: kbox image's --net,
// --net-allow, --net-allow-host, --net-deny-all and --dns, checked by
// the caller (cmd/kbox).
type Net struct {
	Enabled    bool     `json:"enabled"`
	Allow      []string `json:"allow,omitempty"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
	DenyAll    bool     `json:"deny_all,omitempty"`
	DNS        string   `json:"dns,omitempty"`
}

// args are kbox image's options for n.
func (n Net) args() []string {
	if !n.Enabled {
		return nil
	}
	a := []string{"--net"}
	for _, r := range n.Allow {
		a = append(a, "--net-allow", r)
	}
	for _, h := range n.AllowHosts {
		a = append(a, "--net-allow-host", h)
	}
	if n.DenyAll {
		a = append(a, "--net-deny-all")
	}
	if n.DNS != "" {
		a = append(a, "--dns", n.DNS)
	}
	return a
}

// Settings are the operator's settings in effect: the audit log's records
// of the server's runs carry their SHA-256 (SettingsSHA256), and the
// server's mcp_start record holds them.
type Settings struct {
	Image              string `json:"image,omitempty"`
	Images             string `json:"images,omitempty"`
	Snapshots          string `json:"snapshots,omitempty"`
	SnapshotsOverwrite bool   `json:"snapshots_overwrite,omitempty"`
	PolicySHA256       string `json:"policy_sha256,omitempty"`
	Net                Net    `json:"net"`
	Tier               string `json:"tier"`
}

// Settings returns the operator's settings in effect.
func (s *Server) Settings() Settings { return s.settings }

// SettingsSHA256 is the hex SHA-256 of the settings' JSON.
func (s *Server) SettingsSHA256() string { return s.settingsID }

// operatorSettings parses the operator's policy, keeps a private copy of
// it for the runs, and computes the settings and their hash.
func (s *Server) operatorSettings() error {
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p)
	}
	var err error
	c := &s.cfg
	if c.Image, err = abs(c.Image); err != nil {
		return err
	}
	if c.Images, err = abs(c.Images); err != nil {
		return err
	}
	if c.Snapshots, err = abs(c.Snapshots); err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp(c.TmpDir, "kbox-mcp-"); err != nil {
		return err
	}
	s.policyFile = filepath.Join(s.dir, "operator.toml")
	if err := os.WriteFile(s.policyFile, c.Policy, 0o600); err != nil {
		return err
	}
	s.settings = Settings{Image: c.Image, Images: c.Images, Snapshots: c.Snapshots,
		SnapshotsOverwrite: c.SnapshotsOverwrite, Net: c.Net, Tier: "seccomp"}
	if c.Policy != nil {
		if s.policy, err = policy.Parse(c.Policy); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		s.settings.PolicySHA256 = s.policy.SHA256
	}
	b, _ := json.Marshal(s.settings)
	sum := sha256.Sum256(b)
	s.settingsID = hex.EncodeToString(sum[:])
	return nil
}

// nameRe is what an agent may name an image or a snapshot: one file name,
// not hidden (the server's temporary files start with a dot).
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]*$`)

const maxName = 200

func checkName(what, n string) error {
	if len(n) > maxName || !nameRe.MatchString(n) || strings.Contains(n, "..") {
		return toolError("%s %q: want a bare name (letters, digits and . _ + -, not starting with a dot, no / or ..): the server names no host path", what, n)
	}
	return nil
}

// imageOf resolves run's, session_open's or kernel_read's image: "" is
// the operator's --image, a name an image of the --images directory
// (NAME.ext4, else NAME).
func (s *Server) imageOf(name string) (string, error) {
	if name == "" {
		if s.cfg.Image == "" {
			return "", toolError("no image: this server has no default image; give image, one of: %s", s.imageNames())
		}
		if fi, err := os.Stat(s.cfg.Image); err != nil || !fi.Mode().IsRegular() {
			return "", toolError("the server's image %s is gone or not a file", s.cfg.Image)
		}
		return s.cfg.Image, nil
	}
	if s.cfg.Images == "" {
		return "", toolError("image %q: this server takes no image names (its operator gave no --images directory): leave image out for its default image", name)
	}
	if err := checkName("image", name); err != nil {
		return "", err
	}
	var cands []string
	if !strings.HasSuffix(name, ".ext4") {
		cands = append(cands, name+".ext4")
	}
	for _, c := range append(cands, name) {
		p := filepath.Join(s.cfg.Images, c)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", toolError("image %q is not one of the server's images: %s", name, s.imageNames())
}

// imageNames lists the --images directory's images, for an error.
func (s *Server) imageNames() string {
	if s.cfg.Images == "" {
		return "(none: the server has no --images directory)"
	}
	ents, err := os.ReadDir(s.cfg.Images)
	if err != nil {
		return "(the images directory cannot be read)"
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if checkName("", n) != nil {
			continue
		}
		if fi, err := os.Stat(filepath.Join(s.cfg.Images, n)); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		n = strings.TrimSuffix(n, ".ext4")
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "(none: the images directory is empty)"
	}
	sort.Strings(names)
	const maxListed = 100
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// snapshotPath is where session_close saves snapshot name: NAME.ext4 in
// the --snapshots directory (so that --images on the same directory
// finds it as NAME).
func (s *Server) snapshotPath(name string) (string, error) {
	if s.cfg.Snapshots == "" {
		return "", toolError("snapshot %q: this server saves no snapshots (its operator gave no --snapshots directory)", name)
	}
	if err := checkName("snapshot", name); err != nil {
		return "", err
	}
	if !strings.HasSuffix(name, ".ext4") {
		name += ".ext4"
	}
	p := filepath.Join(s.cfg.Snapshots, name)
	if _, err := os.Lstat(p); err == nil && !s.cfg.SnapshotsOverwrite {
		return "", toolError("snapshot %q exists already (this server does not replace snapshots)", strings.TrimSuffix(name, ".ext4"))
	}
	return p, nil
}

// publish renames the finished snapshot tmp to out, replacing one there
// only when the operator allows it, and syncs the directory.
func (s *Server) publish(tmp, out string) error {
	if s.cfg.SnapshotsOverwrite {
		if err := os.Rename(tmp, out); err != nil {
			return err
		}
	} else {
		err := sessiondir.Publish(tmp, out)
		if errors.Is(err, os.ErrExist) {
			return toolError("%q exists already (this server does not replace snapshots)", strings.TrimSuffix(filepath.Base(out), ".ext4"))
		}
		return err
	}
	return sessiondir.SyncDir(filepath.Dir(out))
}

// runPolicy checks an agent's policy for a run (TOML only: a host path
// is refused) against the operator's, and returns the --policy options
// of the run: the operator's file, then the agent's, which kbox image
// merges as this check did. dir is the run's private directory.
func (s *Server) runPolicy(agentTOML, dir string) ([]string, error) {
	if agentTOML == "" {
		if s.policy == nil {
			return nil, nil
		}
		return []string{"--policy", s.policyFile}, nil
	}
	ap, err := policy.Parse([]byte(agentTOML))
	if err != nil {
		t := strings.TrimSpace(agentTOML)
		if !strings.ContainsAny(t, "\n=[") {
			return nil, toolError("policy %q: want the policy's TOML itself (a host path is refused: the server reads no file an agent names)", t)
		}
		return nil, toolError("policy: %v", err)
	}
	base := s.policy
	if base == nil {
		base, _ = policy.Parse(nil)
	}
	m, err := policy.Merge(base, ap)
	if err != nil {
		return nil, toolError("policy: %v", err)
	}
	if s.cfg.CheckPolicy != nil {
		if err := s.cfg.CheckPolicy(m); err != nil {
			return nil, toolError("policy: %v", err)
		}
	}
	file := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(file, []byte(agentTOML), 0o600); err != nil {
		return nil, err
	}
	return []string{"--policy", s.policyFile, "--policy", file}, nil
}

// netArgs are a run's network options: the operator's, unless the agent
// asked for none (want false); asking for a network the operator did not
// give is an error.
func (s *Server) netArgs(want *bool) ([]string, error) {
	if want != nil && *want && !s.cfg.Net.Enabled {
		return nil, toolError("net: this server gives runs no network (its operator did not start kbox mcp with --net)")
	}
	if want != nil && !*want {
		return nil, nil
	}
	return s.cfg.Net.args(), nil
}
