package job

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
)

// reasonSuccessPolicy is the reason of SuccessCriteriaMet (and then Complete) when a rule of an
// Indexed Job's spec.successPolicy matched, as upstream's JobReasonSuccessPolicy.
const reasonSuccessPolicy = batchv1.JobReasonSuccessPolicy

// matchSuccessPolicy reports whether the succeeded indexes done satisfy a rule of policy, and the
// message "Matched rules at index <i>" of the first such rule, as upstream's job controller: a rule
// with succeededIndexes matches when all of them succeeded or, with succeededCount, when at least
// that many of them did; a rule with only succeededCount when that many indexes succeeded. Indexes at
// or above completions are left out of a rule.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int32, done map[int]bool) (string, bool) {
	if policy == nil || len(done) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		matched := false
		if rule.SucceededIndexes != nil {
			required, contains := 0, 0
			for ix := range parseIndexes(*rule.SucceededIndexes) {
				if ix < 0 || ix >= int(completions) {
					continue
				}
				required++
				if done[ix] {
					contains++
				}
			}
			if required == 0 {
				continue
			}
			matched = contains == required || (rule.SucceededCount != nil && contains >= int(*rule.SucceededCount))
		} else if rule.SucceededCount != nil {
			matched = len(done) >= int(*rule.SucceededCount)
		}
		if matched {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}
