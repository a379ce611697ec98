package job

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
)

// reasonPodFailurePolicy is the reason of FailureTarget (and then Failed) when a FailJob rule of
// spec.podFailurePolicy matched a failed pod, as upstream's JobReasonPodFailurePolicy.
const reasonPodFailurePolicy = batchv1.JobReasonPodFailurePolicy

// matchPodFailurePolicy returns the action of the first rule of policy that matches the failed pod
// p (nil: none matched, the failure counts towards backoffLimit), and for FailJob upstream's message
// naming the container and exit code or the pod condition and the rule's index. A rule on exit codes
// matches a terminated container (or init container, limited to containerName when set) with a
// non-zero exit code In (or NotIn) its values; a rule on pod conditions matches a condition of the
// pod with the pattern's type and status.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, p *v1.Pod) (*batchv1.PodFailurePolicyAction, string) {
	if policy == nil {
		return nil, ""
	}
	for i, rule := range policy.Rules {
		var what string
		if r := rule.OnExitCodes; r != nil {
			for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
				t := cs.State.Terminated
				if t == nil || t.ExitCode == 0 || (r.ContainerName != nil && *r.ContainerName != cs.Name) {
					continue
				}
				if slices.Contains(r.Values, t.ExitCode) == (r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
					what = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d", cs.Name, p.Namespace, p.Name, t.ExitCode)
					break
				}
			}
		} else {
			for _, c := range p.Status.Conditions {
				if slices.ContainsFunc(rule.OnPodConditions, func(pat batchv1.PodFailurePolicyOnPodConditionsPattern) bool {
					return pat.Type == c.Type && pat.Status == c.Status
				}) {
					what = fmt.Sprintf("Pod %s/%s has condition %s", p.Namespace, p.Name, c.Type)
					break
				}
			}
		}
		if what != "" {
			action := rule.Action
			return &action, fmt.Sprintf("%s matching %s rule at index %d", what, action, i)
		}
	}
	return nil, ""
}
