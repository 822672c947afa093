//go:build darwin || freebsd || netbsd || openbsd

package render

import (
	"io/fs"
	"syscall"
	"time"
)

// inodeOf is a file's inode and status-change time, when the system says.
func inodeOf(info fs.FileInfo) (uint64, time.Time) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino), time.Unix(int64(st.Ctimespec.Sec), int64(st.Ctimespec.Nsec))
	}
	return 0, time.Time{}
}
