// Every time the dashboard shows is drawn by timeEl, so that one clock
// is used throughout: the browser's locale (12- or 24-hour, as it says)
// and its time zone, the date first when it is not today, and the full
// UTC time in ISO 8601 on hover.
import { el } from './form.js';

// The formats are made once, for the page's lifetime: the locale and
// zone are the browser's, read when the page loads.
// A 24-hour clock writes its hour in two digits (07:08:55), as its users
// read it; ICU's 'numeric' hour drops the zero in some locales and some
// versions, a 12-hour clock keeps 'numeric' (7:08:55 AM).
const hourCycle = new Intl.DateTimeFormat(undefined, { hour: 'numeric' }).resolvedOptions().hourCycle;
const clock = { hour: hourCycle === 'h23' || hourCycle === 'h24' ? '2-digit' : 'numeric', minute: '2-digit', second: '2-digit' };
const date = { year: 'numeric', month: '2-digit', day: '2-digit' };
const formats = {
  time: new Intl.DateTimeFormat(undefined, clock),
  timeMs: new Intl.DateTimeFormat(undefined, { ...clock, fractionalSecondDigits: 3 }),
  dated: new Intl.DateTimeFormat(undefined, { ...date, ...clock }),
  datedMs: new Intl.DateTimeFormat(undefined, { ...date, ...clock, fractionalSecondDigits: 3 }),
  day: new Intl.DateTimeFormat(undefined, date),
};

// timeText is time (an RFC 3339 string, a Date or ms since the epoch)
// as this browser's local time; opts.ms adds the milliseconds (requests
// a test sends often share a second). '' for what is not a time.
function timeText(time, opts = {}) {
  const d = new Date(time);
  if (Number.isNaN(d.getTime())) {
    return '';
  }
  const today = formats.day.format(d) === formats.day.format(new Date());
  return formats[(today ? 'time' : 'dated') + (opts.ms ? 'Ms' : '')].format(d);
}

// timeEl is time as a <time> element: the local time as text, the UTC
// time in ISO 8601 as its datetime and its tooltip. What is not a time
// is shown as it came.
export function timeEl(time, opts = {}) {
  const d = new Date(time);
  if (Number.isNaN(d.getTime())) {
    return el('span', { text: String(time) });
  }
  const utc = d.toISOString();
  return el('time', { datetime: utc, title: utc, class: opts.class, text: timeText(d, opts) });
}
