// Package certificates is certificates.k8s.io/v1 certificatesigningrequests (cluster-scoped) with its
// /status and /approval subresources, following kube-apiserver's strategies:
//
//   - create: spec.username, uid, groups and extra are set from the requesting user (whatever the
//     client sent) and the status is cleared;
//   - update of the main resource: spec and status are kept, only metadata changes;
//   - /status (signers): only status changes, and the Approved/Denied conditions are kept as stored;
//   - /approval (approvers, `kubectl certificate approve|deny`): only status.conditions change.
//
// Validation is validation.CertificateSigningRequest (PEM request with a valid signature, signer name,
// usages, expirationSeconds, conditions).
package certificates

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns "certificatesigningrequests", ".../status" and ".../approval" for
// certificates.k8s.io/v1.
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList {
		return validation.CertificateSigningRequest(o.(*certificatesv1.CertificateSigningRequest))
	})
	s.PrepareCreateFn = setRequestor
	s.PrepareUpdateFn = func(_ context.Context, obj, old runtime.Object) {
		obj.(*certificatesv1.CertificateSigningRequest).Spec = old.(*certificatesv1.CertificateSigningRequest).Spec
	}
	s.ValidateUpdateFn = validateUpdate
	main, _, err := store.New(getter, store.Spec{
		Resource:   certificatesv1.Resource("certificatesigningrequests"),
		Singular:   "certificatesigningrequest",
		ShortNames: []string{"csr"},
		NewFunc:    func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList:    func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		Strategy:   s,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": o.(*certificatesv1.CertificateSigningRequest).Spec.SignerName}
		},
		Table: table,
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"certificatesigningrequests":          main,
		"certificatesigningrequests/status":   store.Subresource(main, &statusStrategy{store.StatusStrategy{Strategy: s, ValidateStatusFn: validateUpdate}}),
		"certificatesigningrequests/approval": store.Subresource(main, &approvalStrategy{store.StatusStrategy{Strategy: s, ValidateStatusFn: validateUpdate}}),
	}, nil
}

func validateUpdate(obj, old runtime.Object) field.ErrorList {
	return validation.CertificateSigningRequestUpdate(obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest))
}

// setRequestor records who asked: the authenticated user of the create request, never client-set values.
func setRequestor(ctx context.Context, obj runtime.Object) {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return
	}
	csr.Spec.Username, csr.Spec.UID = u.GetName(), u.GetUID()
	csr.Spec.Groups = append([]string(nil), u.GetGroups()...)
	for k, v := range u.GetExtra() {
		if csr.Spec.Extra == nil {
			csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
		}
		csr.Spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
	}
}

// statusStrategy is /status: the spec stays (store.StatusStrategy; metadata from the request, as
// upstream's csrStatusStrategy), and so do the stored Approved and Denied conditions — a signer
// reports Failed or the certificate, it does not approve.
type statusStrategy struct{ store.StatusStrategy }

func (s *statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.StatusStrategy.PrepareForUpdate(ctx, obj, old)
	csr, prev := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	var conds []certificatesv1.CertificateSigningRequestCondition
	for _, c := range prev.Status.Conditions {
		if isApproval(c.Type) {
			conds = append(conds, c)
		}
	}
	for _, c := range csr.Status.Conditions {
		if !isApproval(c.Type) {
			conds = append(conds, c)
		}
	}
	csr.Status.Conditions = conds
	stampConditions(csr, prev)
}

// approvalStrategy is /approval: only status.conditions change (the certificate stays as stored).
type approvalStrategy struct{ store.StatusStrategy }

func (s *approvalStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s.StatusStrategy.PrepareForUpdate(ctx, obj, old)
	csr, prev := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	csr.Status.Certificate = prev.Status.Certificate
	stampConditions(csr, prev)
}

func isApproval(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
}

// stampConditions defaults an empty condition status to True and sets lastUpdateTime and
// lastTransitionTime of new or changed conditions to now, as kube-apiserver does.
func stampConditions(csr, old *certificatesv1.CertificateSigningRequest) {
	now := metav1.NewTime(time.Now())
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.Status == "" {
			c.Status = corev1.ConditionTrue
		}
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = now
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = now
		for _, o := range old.Status.Conditions {
			if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
	}
}

// table renders `kubectl get csr`: NAME, SIGNERNAME, REQUESTOR, REQUESTEDDURATION, CONDITION, AGE.
var table = store.Table{
	Columns: []metav1.TableColumnDefinition{
		store.Column("SignerName", "the signer the request is for"),
		store.Column("Requestor", "the user who created the request"),
		store.Column("RequestedDuration", "spec.expirationSeconds"),
		store.Column("Condition", "Pending, Approved, Denied, Failed; Issued once the certificate is set"),
	},
	Cells: func(o runtime.Object) []any {
		csr := o.(*certificatesv1.CertificateSigningRequest)
		requested := "<none>"
		if e := csr.Spec.ExpirationSeconds; e != nil {
			requested = duration.HumanDuration(time.Duration(*e) * time.Second)
		}
		return []any{csr.Spec.SignerName, csr.Spec.Username, requested, Condition(csr)}
	},
}

// Condition summarises a request's state as kubectl prints it: "Pending", or its true
// Approved/Denied/Failed conditions joined by commas, with ",Issued" once a certificate is set.
func Condition(csr *certificatesv1.CertificateSigningRequest) string {
	s := ""
	for _, c := range csr.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Status != "" {
			continue
		}
		if s != "" {
			s += ","
		}
		s += string(c.Type)
	}
	if s == "" {
		s = "Pending"
	}
	if len(csr.Status.Certificate) > 0 {
		s = fmt.Sprintf("%s,Issued", s)
	}
	return s
}
