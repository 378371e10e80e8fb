package sysvipc

import (
	"io"
	"os"
	"strconv"
	"strings"
)

// ReadProc reads /proc/sysvipc/name (msg, sem or shm) as the binder opens
// it, in the guest's namespace; on a failure the file is empty (its header
// line is the host kernel's, so none is made up).
func ReadProc(b Binder, name string) []byte {
	fd, err := b.OpenIPC(name)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "sysvipc/"+name)
	defer f.Close()
	text, _ := io.ReadAll(f)
	return text
}

// The columns of /proc/sysvipc/{msg,sem,shm} that kbox shows as the guest
// sees them: the id, perms, uid, gid, cuid and cgid (and a segment's cpid).
var procCols = map[string]struct {
	kind                       Kind
	uid, gid, cuid, cgid, cpid int
}{
	"msg": {Msg, 7, 8, 9, 10, -1},
	"sem": {Sem, 4, 5, 6, 7, -1},
	"shm": {Shm, 7, 8, 9, 10, 4},
}

// Shown rewrites the lines of /proc/sysvipc/name (the kernel's, in the
// guest's namespace) with the guest's view of each object kbox knows,
// keeping the columns' alignment.
func (s *State) Shown(name string, text []byte) []byte {
	col, known := procCols[name]
	if !known {
		return text
	}
	lines := strings.SplitAfter(string(text), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if i == 0 || len(f) <= col.cgid {
			continue
		}
		id, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil {
			continue
		}
		o, found := s.Lookup(col.kind, int32(id))
		if !found {
			continue
		}
		perms, err := strconv.ParseUint(f[2], 8, 32)
		if err != nil {
			continue
		}
		set := map[int]string{2: strconv.FormatUint(perms&^0o777|uint64(o.Mode), 8),
			col.uid: strconv.FormatUint(uint64(o.UID), 10), col.gid: strconv.FormatUint(uint64(o.GID), 10),
			col.cuid: strconv.FormatUint(uint64(o.CUID), 10), col.cgid: strconv.FormatUint(uint64(o.CGID), 10)}
		if col.cpid >= 0 {
			set[col.cpid] = strconv.Itoa(int(o.Cpid))
		}
		lines[i] = replaceColumns(l, set)
	}
	return []byte(strings.Join(lines, ""))
}

// replaceColumns replaces the whitespace-separated fields of line by index
// with set's values, right-aligned in the field's old width where they fit
// (the kernel prints the columns right-aligned).
func replaceColumns(line string, set map[int]string) string {
	var b strings.Builder
	field, i := 0, 0
	for i < len(line) {
		j := i
		for j < len(line) && (line[j] == ' ' || line[j] == '\t' || line[j] == '\n') {
			j++
		}
		gap := line[i:j]
		k := j
		for k < len(line) && line[k] != ' ' && line[k] != '\t' && line[k] != '\n' {
			k++
		}
		word := line[j:k]
		if word == "" {
			b.WriteString(gap)
			break
		}
		if v, ok := set[field]; ok && v != word {
			switch d := len(v) - len(word); {
			case d < 0:
				gap += strings.Repeat(" ", -d)
			case d > 0 && len(gap) > 1:
				gap = gap[:max(1, len(gap)-d)]
			}
			word = v
		}
		b.WriteString(gap)
		b.WriteString(word)
		field++
		i = k
	}
	return b.String()
}

// sysctls are the files of /proc/sys that belong to the IPC namespace:
// its System V limits and its POSIX message queues' (LKL, without System
// V IPC or message queues, has none of them).
var sysctls = map[string]bool{"kernel/msgmax": true, "kernel/msgmnb": true, "kernel/msgmni": true,
	"kernel/msg_next_id": true, "kernel/sem": true, "kernel/sem_next_id": true, "kernel/shmall": true,
	"kernel/shmmax": true, "kernel/shmmni": true, "kernel/shm_rmid_forced": true, "kernel/shm_next_id": true,
	"kernel/auto_msgmni": true, "fs/mqueue/msg_max": true, "fs/mqueue/msgsize_max": true,
	"fs/mqueue/queues_max": true, "fs/mqueue/msg_default": true, "fs/mqueue/msgsize_default": true}

// IsSysctl says that /proc/sys/name (kernel/msgmnb, fs/mqueue/msg_max) is
// one of the IPC namespace's limits (the binder reads and writes them
// there).
func IsSysctl(name string) bool { return sysctls[name] }
