package main

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// The browsers of these tests run in a locale with a 12-hour clock and in
// a zone that is not UTC (India's: +05:30 all year, no summer time), so a
// time drawn in another clock, or in UTC, shows.
const (
	browserLocale = "en-US"
	browserZone   = "Asia/Kolkata"
)

var kolkata = time.FixedZone("IST", 5*3600+30*60)

// emulate makes the tab's locale and time zone these, as a user's
// browser would have them. The page reads them when it loads.
func (b *browser) emulate(locale, zone string) {
	b.t.Helper()
	b.do("setting the locale and time zone", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if err := t.Call(ctx, "Emulation.setLocaleOverride", map[string]any{"locale": locale}, nil); err != nil {
			return err
		}
		return t.Call(ctx, "Emulation.setTimezoneOverride", map[string]any{"timezoneId": zone}, nil)
	}))
	b.locale = locale
}

// clocks are the ways a time may be written in a locale the tests use
// (Go layouts): today's, another day's, each with the milliseconds or not.
var clocks = map[string]struct{ today, today3, dated, dated3 string }{
	"en-US": {"3:04:05 PM", "3:04:05.000 PM", "01/02/2006, 3:04:05 PM", "01/02/2006, 3:04:05.000 PM"},
	"en-GB": {"15:04:05", "15:04:05.000", "02/01/2006, 15:04:05", "02/01/2006, 15:04:05.000"},
}

// localClock is every way the page may rightly write t in the browser's
// locale and zone: the clock alone on the day it is, the date before it
// otherwise; within a few seconds after midnight, either.
func localClock(locale string, t time.Time) []string {
	c := clocks[locale]
	local, now := t.In(kolkata), time.Now().In(kolkata)
	sameDay := local.Format(time.DateOnly) == now.Format(time.DateOnly)
	nearMidnight := now.Sub(time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, kolkata)) < 5*time.Second
	var out []string
	if sameDay || nearMidnight {
		out = append(out, local.Format(c.today), local.Format(c.today3))
	}
	if !sameDay || nearMidnight {
		out = append(out, local.Format(c.dated), local.Format(c.dated3))
	}
	return out
}

// shownTime is one time as the page draws it.
type shownTime struct {
	Text     string `json:"text"`
	Datetime string `json:"datetime"`
	Title    string `json:"title"`
	Where    string `json:"where"`
}

// timesOnPage reads every <time> of the page, and every text that looks
// like a clock (h:mm:ss) outside one: the latter are times some code drew
// without timeEl. Headers and bodies (what an upstream or a client sent)
// are data, not the page's own times.
const timesOnPage = `(() => {
  const times = [...document.querySelectorAll('time')].map((e) => ({ text: e.textContent, datetime: e.getAttribute('datetime') || '', title: e.title,
    where: (e.closest('[id]') || document.body).id }));
  const stray = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const p = n.parentElement;
    if (/\b\d{1,2}:\d\d:\d\d\b/.test(n.data) && !p.closest('time, pre, dl.headers, textarea') && p.checkVisibility()) {
      stray.push({ text: n.data, where: (p.closest('[id]') || document.body).id });
    }
  }
  return JSON.stringify({ times, stray });
})()`

var isoUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// checkTimes fails the test for a time on the page that is not drawn the
// one way: the local time in the browser's locale as text, the UTC time
// in ISO 8601 as datetime and tooltip. It returns the times, for the
// caller to look for its own.
func (b *browser) checkTimes() []shownTime {
	b.t.Helper()
	var got struct {
		Times []shownTime `json:"times"`
		Stray []shownTime `json:"stray"`
	}
	if err := json.Unmarshal([]byte(eval[string](b, timesOnPage)), &got); err != nil {
		b.t.Fatal(err)
	}
	for _, s := range got.Stray {
		b.t.Errorf("a time not drawn as the others (in #%s): %q", s.Where, s.Text)
	}
	for _, s := range got.Times {
		if !isoUTC.MatchString(s.Datetime) || s.Title != s.Datetime {
			b.t.Errorf("a time (in #%s) has datetime %q and tooltip %q, want both the UTC time in ISO 8601", s.Where, s.Datetime, s.Title)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, s.Datetime)
		if err != nil {
			b.t.Fatal(err)
		}
		text := strings.ReplaceAll(s.Text, "\u202f", " ")
		if want := localClock(b.locale, at); !slices.Contains(want, text) {
			b.t.Errorf("the time %s (in #%s) shows %q, want one of %q (%s, %s)", s.Datetime, s.Where, s.Text, want, b.locale, browserZone)
		}
	}
	return got.Times
}

// timeIn is the time shown inside the element with id where.
func timeIn(b *browser, times []shownTime, where string) shownTime {
	b.t.Helper()
	for _, s := range times {
		if s.Where == where {
			return s
		}
	}
	b.t.Fatalf("no time in #%s among %v", where, times)
	return shownTime{}
}
