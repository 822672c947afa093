package render

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/doppelproxy/doppel/internal/jinja"
)

// maxTemplateFile bounds what is read of a template file.
const maxTemplateFile = 16 << 20

// Files reads template files from <dir>/<proxy>/<file> at request time, so
// a file uploaded after the configuration loaded is used without a reload.
// A compiled template is kept until the file changes (its inode, size,
// modification or change time), so a hot mock does not recompile per
// request. Files are opened through os.Root: a symbolic link cannot lead
// out of the directory.
type Files struct {
	dir   string
	cache sync.Map // proxy/file -> *cachedFile
}

type cachedFile struct {
	stamp fileStamp
	tpl   *jinja.Template
}

type fileStamp struct {
	ino          uint64
	size         int64
	mtime, ctime time.Time
}

// NewFiles serves templates under dir.
func NewFiles(dir string) *Files { return &Files{dir: dir} }

// Template returns the compiled template for proxy's file.
func (f *Files) Template(proxy, file string) (*jinja.Template, error) {
	rel := proxy + "/" + file
	if f == nil {
		return nil, fail(TemplateMissing, "template file %s: no template directory is configured", rel)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, missing(rel, err)
	}
	defer root.Close()
	info, err := root.Stat(rel)
	if err != nil {
		return nil, missing(rel, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fail(TemplateMissing, "template file %s is not a regular file", rel)
	}
	stamp := stampOf(info)
	if c, ok := f.cache.Load(rel); ok && c.(*cachedFile).stamp == stamp {
		return c.(*cachedFile).tpl, nil
	}
	fh, err := root.Open(rel)
	if err != nil {
		return nil, missing(rel, err)
	}
	defer fh.Close()
	src, err := io.ReadAll(io.LimitReader(fh, maxTemplateFile+1))
	if err != nil {
		return nil, missing(rel, err)
	}
	if len(src) > maxTemplateFile {
		return nil, fail(RenderFailed, "template file %s is over %d MiB", rel, maxTemplateFile>>20)
	}
	tpl, err := jinja.Compile(string(src))
	if err != nil {
		return nil, fail(RenderFailed, "template file %s does not parse: %v", rel, err)
	}
	f.cache.Store(rel, &cachedFile{stamp: stamp, tpl: tpl})
	return tpl, nil
}

func missing(rel string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fail(TemplateMissing, "template file %s does not exist", rel)
	}
	return fail(TemplateMissing, "template file %s cannot be read: %v", rel, err)
}

func stampOf(info fs.FileInfo) fileStamp {
	s := fileStamp{size: info.Size(), mtime: info.ModTime()}
	s.ino, s.ctime = inodeOf(info)
	return s
}

// contentTypeOf guesses a template file's type from its name, looking past
// a template suffix: order.json.j2 is JSON. Unknown types are plain text.
func contentTypeOf(file string) string {
	name := file
	for _, suffix := range []string{".j2", ".jinja", ".jinja2", ".tmpl", ".tpl"} {
		name = strings.TrimSuffix(name, suffix)
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "text/plain; charset=utf-8"
}
