package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"regexp"
	"testing"
)

// The vendored files are the package's, byte for byte, and the README
// says which version and checksums they are.
func TestVendoredFilesMatchTheReadme(t *testing.T) {
	readme, err := os.ReadFile("swagger-ui/README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([0-9a-f]{64})` \\|$").FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 5 {
		t.Fatalf("the README lists %d checksums", len(rows))
	}
	for _, row := range rows {
		body, err := fs.ReadFile(SwaggerUI(), row[1])
		if err != nil {
			t.Errorf("%s is listed but not embedded: %v", row[1], err)
			continue
		}
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != row[2] {
			t.Errorf("%s differs from the README's checksum: update both together", row[1])
		}
	}
	for _, own := range []string{"index.html", "index.css", "swagger-initializer.js"} {
		if _, err := fs.Stat(SwaggerUI(), own); err != nil {
			t.Errorf("%s: %v", own, err)
		}
	}
}
