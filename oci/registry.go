package oci

import (
	"crypto/tls"
	"crypto/x509"
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
// registry, or its identity token), or with basic authentication. TLS
// uses the registry's own CA and client certificates when it has some
// (certs.go).
type client struct {
	ref     Ref
	http    *http.Client
	scheme  string     // https; http for a loopback registry that speaks it
	certDir string     // where its certificates came from, for messages
	mu      sync.Mutex // auth: layers download in parallel
	auth    string     // the Authorization header, once known
	creds   func() (credentials, bool)
}

// newClient makes the client for ref's registry, its certificates from
// certDir (--cert-dir) or the registry's certs.d directory.
func newClient(ref Ref, certDir string) (*client, error) {
	dir := registryCertDir(ref, certDir)
	tc, err := tlsConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Registry, err)
	}
	return &client{
		ref:     ref,
		scheme:  "https",
		certDir: dir,
		http: &http.Client{Timeout: 0, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
			ResponseHeaderTimeout: 60 * time.Second, TLSClientConfig: tc}},
		creds: func() (credentials, bool) { return dockerCredentials(ref.Registry) },
	}, nil
}

// ping picks the scheme of a registry on the loopback, as Docker does for
// one: HTTPS, or plain HTTP when that is what it answers in. A TLS
// failure (an unknown CA, a client certificate wanted) is an error that
// says where certificates go.
func (c *client) ping() error {
	u := fmt.Sprintf("https://%s/v2/", c.ref.Host)
	resp, err := c.http.Get(u)
	if err != nil && c.ref.loopback() && speaksHTTP(err) {
		c.scheme = "http"
		return nil
	}
	if err != nil {
		return c.netError(err)
	}
	resp.Body.Close()
	return nil
}

// speaksHTTP reports whether err says that a server answered a TLS
// handshake in plain HTTP.
func speaksHTTP(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// netError is a failed request's error; a TLS one says where the
// registry's certificates go.
func (c *client) netError(err error) error {
	var (
		ua  x509.UnknownAuthorityError
		hn  x509.HostnameError
		ci  x509.CertificateInvalidError
		cv  *tls.CertificateVerificationError
		al  tls.AlertError
		rec tls.RecordHeaderError
	)
	// A TLS alert from the server (a client certificate wanted or
	// refused) is of an unexported type outside QUIC: its text says it.
	alert := errors.As(err, &al) || strings.Contains(err.Error(), "remote error: tls: ")
	if !errors.As(err, &ua) && !errors.As(err, &hn) && !errors.As(err, &ci) && !errors.As(err, &cv) && !alert && !errors.As(err, &rec) {
		return fmt.Errorf("registry: %w", err)
	}
	where := "no certificates of its own: its CA goes in a *.crt, a client certificate in NAME.cert and NAME.key, in a directory given with --cert-dir or in certs.d/" + c.ref.Registry + "/ under ~/.config/containers, /etc/containers or /etc/docker"
	if c.certDir != "" {
		where = "certificates from " + c.certDir
	}
	return fmt.Errorf("registry: TLS with %s failed (%s): %w", c.ref.Host, where, err)
}

func (c *client) url(kind, name string) string {
	return fmt.Sprintf("%s://%s/v2/%s/%s/%s", c.scheme, c.ref.Host, c.ref.Repo, kind, name)
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
			return nil, c.netError(err)
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
	cr, haveCreds := c.creds()
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
		var req *http.Request
		if haveCreds && cr.IdentityToken != "" {
			// An identity token is an OAuth2 refresh token: it is
			// traded for an access token with a form POST to the realm,
			// as Docker does.
			form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {cr.IdentityToken},
				"service": {params["service"]}, "scope": {scope}, "client_id": {"kbox"}}
			req, _ = http.NewRequest("POST", u.String(), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			u.RawQuery = q.Encode()
			req, _ = http.NewRequest("GET", u.String(), nil)
			if haveCreds {
				req.SetBasicAuth(cr.User, cr.Pass)
			}
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("token service: %w", c.netError(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			if req.Method == "POST" {
				return fmt.Errorf("token service %s refused the identity token that Docker's config.json has for %s (log in again: docker login %s): %s: %s",
					u.Host, c.ref.Registry, c.ref.Registry, resp.Status, errorBody(resp))
			}
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
		if haveCreds && cr.IdentityToken != "" {
			return fmt.Errorf("the registry wants a user and password, and Docker's config.json has only an identity token for %s", c.ref.Registry)
		}
		if !haveCreds {
			return fmt.Errorf("the registry wants a user and password, and Docker's config.json has none for %s", c.ref.Registry)
		}
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cr.User+":"+cr.Pass))
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
	if kind == "manifests" {
		if err := checkSchema1(resp.Header.Get("Content-Type"), b); err != nil {
			return nil, "", err
		}
	}
	if d.Digest != "" {
		if err := verifyBlob(d, b, kind+" "+shortDigest(d.Digest)); err != nil {
			return nil, "", err
		}
	}
	return b, resp.Header.Get("Content-Type"), nil
}
