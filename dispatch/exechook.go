package dispatch

import (
	"crypto/sha256"
	"encoding/binary"
)

// ExecRecord is one exec the engine carried out, as Engine.OnExec sees it.
type ExecRecord struct {
	Pid  int
	Path string   // the file executed, a clean guest path
	Argv []string // as the guest gave it, bounded (execArgvMax)
	// ArgvCut says argv had more strings, or longer ones, than recorded.
	ArgvCut bool
	// Interp is a #! script's interpreter ("" for an ELF).
	Interp string
	// SHA256 is the hash of the executed file's bytes (the script, for a
	// script).
	SHA256 [32]byte
}

// Bounds of the argv an ExecRecord keeps.
const (
	execArgvMax    = 256
	execArgStrMax  = 4096
	execArgvPtrBuf = 8
)

// execRecordOf reads what OnExec gets; called only when it is set.
func execRecordOf(r *Request, x *Exec, file *image) *ExecRecord {
	rec := &ExecRecord{Path: x.Path}
	if b, en := file.bytes(); en == 0 {
		rec.SHA256 = sha256.Sum256(b)
	}
	if r.G != nil {
		rec.Pid = r.G.Pid()
	}
	if x.Script {
		rec.Interp = x.ScriptInterp
	}
	rec.Argv, rec.ArgvCut = readArgv(r.G, r.Args[argvArg(r.Nr)])
	return rec
}

// readArgv reads a guest argv array (checked by checkStrings already),
// keeping at most execArgvMax strings of execArgStrMax bytes.
func readArgv(g Guest, addr uint64) ([]string, bool) {
	if g == nil || addr == 0 {
		return nil, false
	}
	var out []string
	var ptr [execArgvPtrBuf]byte
	for i := 0; ; i++ {
		if i == execArgvMax {
			return out, true
		}
		if n, err := g.ReadSome(addr+uint64(i*8), ptr[:]); err != nil || n < 8 {
			return out, true
		}
		p := binary.NativeEndian.Uint64(ptr[:])
		if p == 0 {
			return out, false
		}
		s, en := readString(g, p, execArgStrMax)
		if en != 0 {
			return out, true
		}
		out = append(out, s)
	}
}
