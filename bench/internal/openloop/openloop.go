// Package openloop is what bench/cmd/loadgen reports and the orchestrator
// (bench/cmd/bench) reads: one shape for both.
package openloop

// Result is one fixed-rate run of loadgen, printed as one JSON object.
type Result struct {
	URL      string  `json:"url"`
	Rate     float64 `json:"rate"`
	Duration float64 `json:"duration_s"`
	Sent     int     `json:"sent"`
	OK       int     `json:"ok"`
	Non2xx   int     `json:"non2xx"`
	Errors   int     `json:"errors"`
	Late     int     `json:"late_dispatch"`
	LagP50us float64 `json:"dispatch_lag_p50_us"`
	LagP99us float64 `json:"dispatch_lag_p99_us"`
	P50us    float64 `json:"p50_us"`
	P90us    float64 `json:"p90_us"`
	P99us    float64 `json:"p99_us"`
	P999us   float64 `json:"p999_us"`
	MaxUs    float64 `json:"max_us"`
	// PeakInFlight is the most requests sent and not yet answered at once;
	// PeakConns the most connections open at once.
	PeakInFlight int    `json:"peak_in_flight"`
	PeakConns    int    `json:"peak_conns"`
	FirstError   string `json:"first_error,omitempty"`
}
