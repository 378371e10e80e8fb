package oci

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// dockerConfig is what kbox reads of Docker's config.json.
type dockerConfig struct {
	Auths map[string]struct {
		Auth     string `json:"auth"`
		Username string `json:"username"`
		Password string `json:"password"`
		// IdentityToken is an OAuth2 refresh token (docker login with
		// an identity provider writes it in place of a password).
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	// CredsStore names the credential helper for every registry,
	// CredHelpers one per registry (it wins).
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// credentials are what kbox presents for a registry: a user and
// password, or an identity token (an OAuth2 refresh token, sent to the
// token service in place of them).
type credentials struct {
	User, Pass    string
	IdentityToken string
}

// helperTimeout bounds a credential helper's run (it may ask a keyring).
const helperTimeout = 30 * time.Second

// dockerCredentials reads the registry's user and password as Docker does,
// from config.json ($DOCKER_CONFIG/config.json, else
// ~/.docker/config.json): the registry's credential helper (credHelpers,
// else credsStore: `docker-credential-NAME get` on PATH), else its "auths"
// entry (its identitytoken first, then auth or username and password).
// A helper's answer with user "<token>" is an identity token.
func dockerCredentials(registry string) (credentials, bool) {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return credentials{}, false
		}
		dir = filepath.Join(home, ".docker")
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return credentials{}, false
	}
	var cfg dockerConfig
	if json.Unmarshal(b, &cfg) != nil {
		return credentials{}, false
	}
	keys := []string{registry, "https://" + registry, "http://" + registry}
	server := registry
	if registry == "docker.io" {
		keys = append(keys, "https://index.docker.io/v1/", "index.docker.io", "registry-1.docker.io")
		server = "https://index.docker.io/v1/"
	}
	helper := cfg.CredsStore
	for _, k := range keys {
		if h := cfg.CredHelpers[k]; h != "" {
			helper = h
			break
		}
	}
	if helper != "" {
		return helperCredentials(helper, server)
	}
	for _, k := range keys {
		a, ok := cfg.Auths[k]
		if !ok {
			continue
		}
		if a.IdentityToken != "" {
			return credentials{IdentityToken: a.IdentityToken}, true
		}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if user, pass, ok := strings.Cut(string(dec), ":"); err == nil && ok {
				return credentials{User: user, Pass: pass}, true
			}
		}
		if a.Username != "" {
			return credentials{User: a.Username, Pass: a.Password}, true
		}
	}
	return credentials{}, false
}

// helperCredentials asks credential helper name for server's credentials
// (the helpers' protocol: `get`, the server on stdin, JSON on stdout). A
// helper that is missing, fails (no credentials for server) or answers
// nonsense gives none.
func helperCredentials(name, server string) (credentials, bool) {
	if strings.ContainsAny(name, "/\x00") {
		return credentials{}, false
	}
	bin, err := exec.LookPath("docker-credential-" + name)
	if err != nil {
		return credentials{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "get")
	cmd.Stdin = strings.NewReader(server)
	var out bytes.Buffer
	cmd.Stdout = &out
	if cmd.Run() != nil {
		return credentials{}, false
	}
	var c struct {
		Username string `json:"Username"`
		Secret   string `json:"Secret"`
	}
	if json.Unmarshal(out.Bytes(), &c) != nil || c.Username == "" {
		return credentials{}, false
	}
	if c.Username == "<token>" {
		if c.Secret == "" {
			return credentials{}, false
		}
		return credentials{IdentityToken: c.Secret}, true
	}
	return credentials{User: c.Username, Pass: c.Secret}, true
}
