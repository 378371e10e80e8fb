package oci

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// client talks to one repository of a registry (the distribution v2
// API), authenticating as the registry asks: anonymously, with a bearer
// token from the token service its WWW-Authenticate challenge names
// (with Docker's config.json credentials when it has some for the
// registry), or with basic authentication.
type client struct {
	ref   Ref
	http  *http.Client
	mu    sync.Mutex // auth: layers download in parallel
	auth  string     // the Authorization header, once known
	creds func() (user, pass string, ok bool)
}

func newClient(ref Ref) *client {
	return &client{
		ref:   ref,
		http:  &http.Client{Timeout: 0, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 60 * time.Second}},
		creds: func() (string, string, bool) { return dockerCredentials(ref.Registry) },
	}
}

func (c *client) url(kind, name string) string {
	return fmt.Sprintf("%s://%s/v2/%s/%s/%s", c.ref.scheme(), c.ref.Host, c.ref.Repo, kind, name)
}

// RegistryError is a registry's answer other than success.
type RegistryError struct {
	URL    string
	Status string
	Msg    string
}

func (e *RegistryError) Error() string {
	s := fmt.Sprintf("registry: GET %s: %s", e.URL, e.Status)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// get issues a GET, authenticating once if the registry asks to.
func (c *client) get(u string, header http.Header) (*http.Response, error) {
	for try := 0; ; try++ {
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			return nil, err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		c.mu.Lock()
		auth := c.auth
		c.mu.Unlock()
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		if resp.StatusCode != http.StatusUnauthorized || try > 0 {
			if resp.StatusCode >= 300 && resp.StatusCode != http.StatusPartialContent {
				defer resp.Body.Close()
				return nil, &RegistryError{URL: u, Status: resp.Status, Msg: errorBody(resp)}
			}
			return resp, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		msg := errorBody(resp)
		resp.Body.Close()
		c.mu.Lock()
		err = nil
		if c.auth == auth { // no other download has answered it meanwhile
			err = c.authenticate(challenge)
		}
		c.mu.Unlock()
		if err != nil {
			return nil, &RegistryError{URL: u, Status: "401 Unauthorized", Msg: fmt.Sprintf("%v (registry said: %s)", err, msg)}
		}
	}
}

// errorBody is the first line of an error answer's body.
func errorBody(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var e struct {
		Errors []struct{ Code, Message string }
	}
	if json.Unmarshal(b, &e) == nil && len(e.Errors) > 0 {
		return e.Errors[0].Code + ": " + e.Errors[0].Message
	}
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// authenticate answers a WWW-Authenticate challenge.
func (c *client) authenticate(challenge string) error {
	scheme, params := parseChallenge(challenge)
	user, pass, haveCreds := c.creds()
	switch strings.ToLower(scheme) {
	case "bearer":
		realm := params["realm"]
		if realm == "" {
			return errors.New("a Bearer challenge without a realm: no way to a token")
		}
		u, err := url.Parse(realm)
		if err != nil || u.Scheme != "https" && u.Scheme != "http" {
			return fmt.Errorf("bad token realm %q", realm)
		}
		q := u.Query()
		if s := params["service"]; s != "" {
			q.Set("service", s)
		}
		scope := params["scope"]
		if scope == "" {
			scope = "repository:" + c.ref.Repo + ":pull"
		}
		q.Set("scope", scope)
		u.RawQuery = q.Encode()
		req, _ := http.NewRequest("GET", u.String(), nil)
		if haveCreds {
			req.SetBasicAuth(user, pass)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("token service: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("token service %s: %s: %s", u.Host, resp.Status, errorBody(resp))
		}
		var tok struct {
			Token       string `json:"token"`
			AccessToken string `json:"access_token"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok); err != nil {
			return fmt.Errorf("token service: %w", err)
		}
		t := tok.Token
		if t == "" {
			t = tok.AccessToken
		}
		if t == "" {
			return errors.New("token service: no token in its answer")
		}
		c.auth = "Bearer " + t
		return nil
	case "basic":
		if !haveCreds {
			return fmt.Errorf("the registry wants a user and password, and Docker's config.json has none for %s", c.ref.Registry)
		}
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		return nil
	}
	return fmt.Errorf("unauthorized, and no way to a token (WWW-Authenticate: %q)", challenge)
}

// parseChallenge splits `Bearer realm="...",service="..."`.
func parseChallenge(h string) (string, map[string]string) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string]string{}
	for rest != "" {
		rest = strings.TrimLeft(rest, " ,")
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		if strings.HasPrefix(v, `"`) {
			end := strings.Index(v[1:], `"`)
			if end < 0 {
				break
			}
			params[strings.ToLower(strings.TrimSpace(k))] = v[1 : end+1]
			rest = v[end+2:]
		} else {
			val, r, _ := strings.Cut(v, ",")
			params[strings.ToLower(strings.TrimSpace(k))] = val
			rest = r
		}
	}
	return scheme, params
}

// getSmall reads a manifest or a config, verified against d (when d has
// a digest).
func (c *client) getSmall(kind, name string, d descriptor) ([]byte, string, error) {
	h := http.Header{}
	if kind == "manifests" {
		h.Set("Accept", manifestAcceptList)
	}
	u := c.url(kind, name)
	resp, err := c.get(u, h)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, smallMax+1))
	if err != nil {
		return nil, "", fmt.Errorf("registry: GET %s: %w", u, err)
	}
	if len(b) > smallMax {
		return nil, "", fmt.Errorf("registry: GET %s: more than %d bytes", u, smallMax)
	}
	if d.Digest != "" {
		if err := verifyBlob(d, b, kind+" "+shortDigest(d.Digest)); err != nil {
			return nil, "", err
		}
	}
	return b, resp.Header.Get("Content-Type"), nil
}
