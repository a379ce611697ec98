package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/transport"

	fw "github.com/nodekit/nodekit/test/framework/apiserver"
)

// TestAPIPriorityAndFairness checks flowcontrol.apiserver.k8s.io/v1 on a real API server and etcd: the
// bootstrap configuration is in place (mandatory and suggested objects, annotated for auto-update), the
// APF filter classifies requests (its response headers name the FlowSchema and priority level by UID),
// a FlowSchema written for one user routes that user's requests to it, the status subresource writes
// only status, and validation names the field (the mandatory objects' specs are fixed).
func TestAPIPriorityAndFairness(t *testing.T) {
	s := fw.Start(t, fw.Options{})
	ctx := ctxT(t)
	fc := s.Client.FlowcontrolV1()

	var exempt *flowcontrolv1.FlowSchema
	await(t, 30*time.Second, "bootstrap FlowSchemas and priority levels", func() error {
		for _, n := range []string{"exempt", "catch-all", "system", "node-high", "leader-election", "workload-high", "workload-low", "global-default"} {
			pl, err := fc.PriorityLevelConfigurations().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pl.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" {
				return fmt.Errorf("priority level %s annotations %v", n, pl.Annotations)
			}
		}
		for _, n := range []string{"exempt", "catch-all", "probes", "system-nodes", "system-node-high", "system-leader-election",
			"kube-controller-manager", "kube-scheduler", "kube-system-service-accounts", "service-accounts", "global-default"} {
			fs, err := fc.FlowSchemas().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n == "exempt" {
				exempt = fs
			}
		}
		return nil
	})

	tc, err := s.Config.TransportConfig()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := transport.New(tc)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rt, Timeout: 30 * time.Second}
	// headers returns the FlowSchema and priority level UIDs of GET path, as user (impersonated) or as the admin.
	headers := func(path, user string) (fs, pl string, code int, err error) {
		req, _ := http.NewRequest("GET", s.Config.Host+path, nil)
		if user != "" {
			req.Header.Set("Impersonate-User", user)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", 0, err
		}
		resp.Body.Close()
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID), resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID), resp.StatusCode, nil
	}
	exemptPL, err := fc.PriorityLevelConfigurations().Get(ctx, "exempt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the admin (system:masters) is exempt
	await(t, 30*time.Second, "admin request classified as exempt", func() error {
		fs, pl, _, err := headers("/api/v1/namespaces", "")
		if err != nil || fs != string(exempt.UID) || pl != string(exemptPL.UID) {
			return fmt.Errorf("headers %q %q, %v; want exempt %s %s", fs, pl, err, exempt.UID, exemptPL.UID)
		}
		return nil
	})

	// A priority level and a FlowSchema for one user: that user's requests are routed to them (the
	// request is then refused by RBAC; APF has classified it before authorization).
	five := int32(5)
	pl, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "nk-alice"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: &five, LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pl.Spec.Limited.LimitResponse.Queuing; q.Queues != 64 || q.HandSize != 8 || q.QueueLengthLimit != 50 || *pl.Spec.Limited.LendablePercent != 0 {
		t.Errorf("priority level defaults: %+v", pl.Spec.Limited)
	}
	fs, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "nk-alice"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl.Name},
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("matchingPrecedence default = %d, want 1000", fs.Spec.MatchingPrecedence)
	}
	await(t, 30*time.Second, "alice's request routed to her FlowSchema", func() error {
		f, p, code, err := headers("/api/v1/namespaces", "alice")
		if err != nil || f != string(fs.UID) || p != string(pl.UID) || code != http.StatusForbidden {
			return fmt.Errorf("alice: %d headers %q %q, %v; want 403 with %s %s", code, f, p, err, fs.UID, pl.UID)
		}
		return nil
	})
	// bob matches no custom schema: catch-all's global-default neighbour, not alice's
	if f, _, _, err := headers("/api/v1/namespaces", "bob"); err != nil || f == "" || f == string(fs.UID) || f == string(exempt.UID) {
		t.Errorf("bob's request classified by %q, %v", f, err)
	}

	// `kubectl get` columns, as upstream's printers
	var table metav1.Table
	raw, err := s.Client.FlowcontrolV1().RESTClient().Get().Resource("prioritylevelconfigurations").Name(pl.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil || json.Unmarshal(raw, &table) != nil || len(table.Rows) != 1 {
		t.Fatalf("priority level table: %v %s", err, raw)
	}
	if got := fmt.Sprint(table.Rows[0].Cells[:6]); got != "[nk-alice Limited 5 64 8 50]" {
		t.Errorf("priority level table row %v, columns %v", table.Rows, table.ColumnDefinitions)
	}

	// the config controller marks the schema's condition (status written through flowschemas/status)
	await(t, 30*time.Second, "FlowSchema Dangling=False", func() error {
		got, err := fc.FlowSchemas().Get(ctx, fs.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling && c.Status == flowcontrolv1.ConditionFalse {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	// a status patch changes only status
	patched, err := fc.FlowSchemas().Patch(ctx, fs.Name, types.MergePatchType,
		[]byte(`{"spec":{"matchingPrecedence":999},"status":{"conditions":[{"type":"Dangling","status":"True","reason":"Test"}]}}`), metav1.PatchOptions{}, "status")
	if err != nil || patched.Spec.MatchingPrecedence != 1000 || len(patched.Status.Conditions) != 1 || patched.Status.Conditions[0].Reason != "Test" {
		t.Errorf("status patch: %v, %+v %+v", err, patched.Spec.MatchingPrecedence, patched.Status)
	}

	// validation names the field; the mandatory objects' specs are fixed
	bad := fs.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "nk-bad"}
	bad.Spec.MatchingPrecedence = 20000
	bad.Spec.Rules[0].Subjects[0].User = nil
	_, err = fc.FlowSchemas().Create(ctx, bad, metav1.CreateOptions{})
	for _, want := range []string{"spec.matchingPrecedence: Invalid value: 20000: must not be greater than 10000",
		"spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'"} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid FlowSchema: %v, want 422 with %q", err, want)
		}
	}
	badPL := pl.DeepCopy()
	badPL.ObjectMeta = metav1.ObjectMeta{Name: "nk-bad"}
	badPL.Spec.Limited.LimitResponse.Queuing.HandSize = 100
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, badPL, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec.limited.limitResponse.queuing.handSize: Invalid value: 100: should not be greater than queues (64)") {
		t.Errorf("invalid PriorityLevelConfiguration: %v", err)
	}
	catchAll, err := fc.FlowSchemas().Get(ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	catchAll.Spec.MatchingPrecedence = 5000
	if _, err := fc.FlowSchemas().Update(ctx, catchAll, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec of 'catch-all' must equal the fixed value") {
		t.Errorf("catch-all spec change: %v", err)
	}
}
