package change

import (
	"context"
	"errors"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/store"
)

// Follow keeps the configuration in force equal to what w stores when it
// changes behind this process (another replica's write, an edit of the
// file): each change announced is a reload. A change whose revision is the
// one in force (this process's own write) costs nothing. An invalid
// document is refused whole and logged with every violation, and the
// running configuration stays until the next change; any other failure (a
// connection the database dropped) may pass, and is tried again. It
// returns once w is watching.
func (c *Controller) Follow(ctx context.Context, w store.Watcher) error {
	where := w.Describe()
	return w.Watch(ctx, c.log.Logger, func(revision string) bool {
		if revision != "" && revision == string(c.holder.Load().Revision) {
			return true
		}
		res, err := c.Reload(ctx)
		if err != nil {
			var inv *config.Invalid
			if errors.As(err, &inv) {
				c.log.Warn("the edited configuration is rejected; the running one stays", "source", where, "violations", inv.Lines())
				return true
			}
			c.log.Warn("a change in "+where+" could not be loaded; the running configuration is unchanged", "error", err.Error(), "retrying", true)
			return false
		}
		c.log.Info("reloaded after a change in "+where, "revision", string(res.Runtime.Revision), "proxies", len(res.Runtime.Proxies))
		return true
	})
}
