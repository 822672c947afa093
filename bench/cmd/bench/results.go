package main

import (
	"encoding/json"
	"os"
	"time"

	"github.com/doppelproxy/doppel/bench/internal/openloop"
)

// results is what one run measured, saved beside its report so that the
// plot can be drawn again from it (-plot-from).
type results struct {
	When     time.Time                    `json:"when"`
	Rounds   int                          `json:"rounds"`
	Rate     float64                      `json:"rate"`
	Wrk      []wrkResult                  `json:"wrk"`
	OpenLoop map[string][]openloop.Result `json:"open_loop"`
	Scale    []scaleResult                `json:"scale"`
}

type wrkResult struct {
	Target string   `json:"target"`
	Path   string   `json:"path"`
	Runs   []wrkRun `json:"runs"`
}

type scaleResult struct {
	Name     string     `json:"name"`
	Server   string     `json:"server,omitempty"` // doppel or toxiproxy
	Rate     float64    `json:"rate,omitempty"`
	TargetMS float64    `json:"target_ms"`
	Runs     []scaleRun `json:"runs"`
}

func (b *benchmark) results() results {
	r := results{When: time.Now().UTC(), Rounds: b.roundsDone, Rate: b.cfg.rate, OpenLoop: b.lg}
	for _, c := range b.cases {
		r.Wrk = append(r.Wrk, wrkResult{Target: c.key.target, Path: c.key.path, Runs: b.wrk[c.key]})
	}
	for _, c := range b.scaleCases {
		r.Scale = append(r.Scale, scaleResult{Name: c.name, Server: c.server, Rate: c.rate, TargetMS: float64(c.target.Microseconds()) / 1e3, Runs: b.scale[c.name]})
	}
	return r
}

func (b *benchmark) save(path string) error {
	data, err := json.MarshalIndent(b.results(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
