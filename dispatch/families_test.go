package dispatch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestHandlersLiveWithTheirFamily: every handler the table names is in a
// file sys_FAMILY.go or sys_FAMILY_TOPIC.go of its entry's family, so the
// table's Fam says where a syscall is served.
func TestHandlersLiveWithTheirFamily(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{} // function name -> file
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, isFunc := d.(*ast.FuncDecl); isFunc && fd.Recv == nil {
				where[fd.Name.Name] = f
			}
		}
	}
	checked := 0
	for _, s := range table {
		name := s.Name
		if s.Fn == nil {
			continue
		}
		full := runtime.FuncForPC(reflect.ValueOf(s.Fn).Pointer()).Name()
		fn := full[strings.LastIndex(full, ".")+1:]
		file, found := where[fn]
		if !found {
			t.Errorf("%s: handler %s not found in dispatch's files", name, fn)
			continue
		}
		want := regexp.MustCompile(`^sys_` + s.Fam.String() + `(_[a-z]+)?\.go$`)
		if !want.MatchString(file) {
			t.Errorf("%s (family %s): handler %s is in %s, want sys_%s[_TOPIC].go", name, s.Fam, fn, file, s.Fam)
		}
		checked++
	}
	if checked < 100 {
		t.Errorf("only %d handlers checked", checked)
	}
}
