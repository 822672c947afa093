package store

import (
	"context"
	"slices"

	"github.com/doppelproxy/doppel/internal/config"
)

// Advisories are the document's advisories (config.Advisories) and its
// mocks' template files that st does not hold. A store that cannot be
// asked does not make a file look missing.
func Advisories(ctx context.Context, st Store, doc *config.Document) []config.Advisory {
	as := config.Advisories(doc)
	if st == nil {
		return as
	}
	listed := map[string][]string{}
	has := func(proxy, file string) bool {
		names, ok := listed[proxy]
		if !ok {
			files, err := st.Templates(ctx, proxy)
			if err != nil {
				return true
			}
			names = []string{}
			for _, f := range files {
				names = append(names, f.Name)
			}
			listed[proxy] = names
		}
		return slices.Contains(names, file)
	}
	return append(as, config.MissingTemplates(doc, has)...)
}
