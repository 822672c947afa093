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
// connection the database dropped) may pass, and is tried again, logged
// once while it stays the same. stopped is closed once following has
// ended, after ctx did.
func (c *Controller) Follow(ctx context.Context, w store.Watcher) (stopped <-chan struct{}, err error) {
	where := w.Describe()
	failing := "" // the failure last logged, while it repeats
	return w.Watch(ctx, c.log.Logger, func(revision string) bool {
		if revision != "" && revision == string(c.holder.Load().Revision) {
			return true
		}
		before := c.holder.Load().Revision
		res, err := c.reload(ctx)
		if err != nil {
			var inv *config.Invalid
			if errors.As(err, &inv) {
				failing = ""
				c.log.Warn("the edited configuration is rejected; the running one stays", "source", where, "violations", inv.Lines())
				return true
			}
			if msg := err.Error(); msg != failing {
				failing = msg
				c.log.Warn("a change in "+where+" could not be loaded; the running configuration is unchanged", "error", msg, "retrying", true)
			}
			return false
		}
		failing = ""
		if res.Runtime.Revision == before {
			// A catch-up that found nothing new.
			c.log.Debug("the configuration in "+where+" is the one in force", "revision", string(before))
			return true
		}
		c.logReloaded(res, "source", where)
		return true
	})
}
