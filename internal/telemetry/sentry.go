package telemetry

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/getsentry/sentry-go"
)

// EnvSentryDSN overrides sentry.dsn; an empty value counts as unset.
const EnvSentryDSN = "DOPPEL_SENTRY_DSN"

// SentryDSN settles the DSN and where it came from: the environment wins
// over the document; "" means reporting is off.
func SentryDSN(fromDocument string) (dsn, source string) {
	if v := strings.TrimSpace(os.Getenv(EnvSentryDSN)); v != "" {
		return v, EnvSentryDSN
	}
	if fromDocument != "" {
		return fromDocument, "sentry.dsn"
	}
	return "", ""
}

// MaskDSN hides a DSN's key (its user part), which authorises sending
// events, wherever a DSN could be shown: the key becomes `***` and a
// password `***` too (***:***@host), the host stays. A DSN that does not
// parse is shown as <redacted>, as Doppel 1.1 shows it.
func MaskDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "<redacted>"
	}
	if u.User == nil {
		return u.String()
	}
	// Put back by hand: url.User would escape the mask.
	userinfo := "***@"
	if _, has := u.User.Password(); has {
		userinfo = "***:***@"
	}
	u.User = nil
	return strings.Replace(u.String(), "://", "://"+userinfo, 1)
}

// Reporter sends errors Doppel could not handle (recovered panics, failed
// writes) to Sentry. The zero Reporter reports nothing.
type Reporter struct {
	client *sentry.Client
}

// NewReporter starts reporting to dsn. A malformed DSN is an error whose
// message shows the DSN masked.
func NewReporter(dsn, release string) (*Reporter, error) {
	if dsn == "" {
		return &Reporter{}, nil
	}
	c, err := sentry.NewClient(sentry.ClientOptions{Dsn: dsn, Release: "doppel@" + release})
	if err != nil {
		return nil, fmt.Errorf("the Sentry DSN %s is not valid: %s", MaskDSN(dsn), strings.ReplaceAll(err.Error(), dsn, MaskDSN(dsn)))
	}
	return &Reporter{client: c}, nil
}

// Enabled reports whether events are sent.
func (r *Reporter) Enabled() bool { return r != nil && r.client != nil }

// Report sends one event.
func (r *Reporter) Report(err error) {
	if !r.Enabled() {
		return
	}
	r.client.CaptureException(err, nil, nil)
}

// Flush waits (a little) for events under way, at shutdown.
func (r *Reporter) Flush() {
	if r.Enabled() {
		r.client.Flush(2 * time.Second)
	}
}
