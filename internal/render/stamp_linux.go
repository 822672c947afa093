package render

import (
	"io/fs"
	"syscall"
	"time"
)

// inodeOf is a file's inode and status-change time, when the system says.
func inodeOf(info fs.FileInfo) (uint64, time.Time) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino, time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return 0, time.Time{}
}
