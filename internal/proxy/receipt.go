package proxy

import (
	"strconv"

	"github.com/doppelproxy/doppel/internal/config"
	"github.com/doppelproxy/doppel/internal/telemetry"
)

// Receipts (SPEC §17.4): X-Doppel-Fault on an answer says what fired, so
// a failing test shows why.
const (
	headerReceipt        = "X-Doppel-Fault"
	headerReceiptRequest = "X-Doppel-Receipt"
)

// wantsReceipt reports whether the proxy puts a receipt on this answer.
func (ex *exchange) wantsReceipt() bool {
	if ex.proxy == nil {
		return false
	}
	switch ex.proxy.Config.Receipts {
	case config.ReceiptsAlways:
		return true
	case config.ReceiptsOnRequest:
		return ex.req.Header.Get(headerReceiptRequest) == "1"
	}
	return false
}

// receipt is replace=mock|upstream;loss=yes|no;abort=no|body;latency=<n>ms:
// written with the answer's headers, so the latency is the wait taken.
func receipt(r *telemetry.Exchange) string {
	b := make([]byte, 0, 64)
	b = append(b, "replace="...)
	if r.Mock != "" {
		b = append(b, "mock"...)
	} else {
		b = append(b, "upstream"...)
	}
	b = append(b, ";loss="...)
	b = append(b, yesNo(r.Fired("loss"))...)
	b = append(b, ";abort="...)
	if r.Abort != "" {
		b = append(b, r.Abort...) // the answer shows only an abort at body
	} else {
		b = append(b, "no"...)
	}
	b = append(b, ";latency="...)
	b = strconv.AppendInt(b, r.LatencyWaited.Milliseconds(), 10)
	b = append(b, "ms"...)
	return string(b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
