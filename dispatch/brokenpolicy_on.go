//go:build kbox_broken_policy

package dispatch

// brokenHidden: this build does NOT enforce paths.hidden. Only for the
// test that shows `kbox probe` failing on a broken enforcement; never
// ship it.
const brokenHidden = true
