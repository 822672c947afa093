package proxy

import "testing"

// TestTheAnswerOnlyMovesForward: each step of an answer is taken once and
// never undone; cut and detached are final, whichever comes first.
func TestTheAnswerOnlyMovesForward(t *testing.T) {
	for _, tc := range []struct {
		steps []answerState
		want  answerState
	}{
		{[]answerState{answerHeld}, answerHeld},
		{[]answerState{answerHeld, answerStarted}, answerStarted},                 // released
		{[]answerState{answerStarted, answerHeld}, answerStarted},                 // held too late: ignored
		{[]answerState{answerHeld, answerDetached}, answerDetached},               // parked
		{[]answerState{answerStarted, answerCut, answerStarted}, answerCut},       // a tunnel's 101 after its cut
		{[]answerState{answerCut, answerDetached}, answerCut},                     // final
		{[]answerState{answerStarted, answerDetached, answerCut}, answerDetached}, // final
	} {
		ex := &exchange{}
		for _, s := range tc.steps {
			ex.to(s)
		}
		if ex.answer != tc.want {
			t.Errorf("after %v: %v, want %v", tc.steps, ex.answer, tc.want)
		}
	}
}
