package oci

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDockerCredentials: config.json's credential helpers (credHelpers for
// the registry, else credsStore) win over its auths, as in Docker; a
// helper that fails or is missing gives none; a helper's "<token>" user
// and an auths entry's identitytoken are identity tokens; auths alone
// still work.
func TestDockerCredentials(t *testing.T) {
	bin := t.TempDir()
	// A helper that knows one server and logs what it was asked.
	helper := `#!/bin/sh
test "$1" = get || exit 3
read server
if [ "$server" = "reg.example:5000" ]; then
	echo '{"ServerURL":"reg.example:5000","Username":"alice","Secret":"pw-from-helper"}'
elif [ "$server" = "token.example" ]; then
	echo '{"ServerURL":"token.example","Username":"<token>","Secret":"refresh"}'
else
	echo "credentials not found in native keychain"; exit 1
fi
`
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-kboxtest"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	for _, c := range []struct {
		name, config, registry string
		user, pass, token      string
		ok                     bool
	}{
		{"credHelpers", `{"credHelpers":{"reg.example:5000":"kboxtest"},"auths":{"reg.example:5000":{"username":"bob","password":"x"}}}`,
			"reg.example:5000", "alice", "pw-from-helper", "", true},
		{"credsStore", `{"credsStore":"kboxtest"}`, "reg.example:5000", "alice", "pw-from-helper", "", true},
		{"helper knows nothing", `{"credsStore":"kboxtest"}`, "other.example", "", "", "", false},
		{"helper's identity token", `{"credsStore":"kboxtest"}`, "token.example", "", "", "refresh", true},
		{"missing helper", `{"credsStore":"nosuchhelper"}`, "reg.example:5000", "", "", "", false},
		{"helper name with a slash", `{"credsStore":"../kboxtest"}`, "reg.example:5000", "", "", "", false},
		{"auths", `{"auths":{"reg.example:5000":{"username":"bob","password":"x"}}}`, "reg.example:5000", "bob", "x", "", true},
		{"auths identitytoken", `{"auths":{"reg.example:5000":{"auth":"Ym9iOnk=","identitytoken":"rt-1"}}}`, "reg.example:5000", "", "", "rt-1", true},
		{"credHelpers for another registry", `{"credHelpers":{"other.example":"kboxtest"},"auths":{"reg.example:5000":{"auth":"Ym9iOnk="}}}`,
			"reg.example:5000", "bob", "y", "", true},
		{"bad json", `{`, "reg.example:5000", "", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("DOCKER_CONFIG", dir)
			cr, ok := dockerCredentials(c.registry)
			if cr.User != c.user || cr.Pass != c.pass || cr.IdentityToken != c.token || ok != c.ok {
				t.Errorf("got %+v %v, want %q %q %q %v", cr, ok, c.user, c.pass, c.token, c.ok)
			}
		})
	}
}
