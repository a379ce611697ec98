// Package storagemigration is the storagemigration.k8s.io/v1 storageversionmigrations resource
// (cluster-scoped, with /status): a request to rewrite every stored object of one resource in the API
// server's current storage encoding. The storage-version-migrator controllers
// (controlplane/controllers/storagemigration) act on it; the registry only validates and stores.
package storagemigration

import (
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodekit/nodekit/controlplane/apiserver/registry/store"
	"github.com/nodekit/nodekit/controlplane/apiserver/validation"
)

// NewStorage returns "storageversionmigrations" and "storageversionmigrations/status". The spec is
// immutable after create and status is written only through /status, with upstream's validation
// (validation.StorageVersionMigration, ...Update, ...Status).
func NewStorage(getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	s := store.NewStrategy(false, true, func(o runtime.Object) field.ErrorList {
		return validation.StorageVersionMigration(o.(*svmv1.StorageVersionMigration))
	})
	s.ValidateUpdateFn = func(o, old runtime.Object) field.ErrorList {
		return validation.StorageVersionMigrationUpdate(o.(*svmv1.StorageVersionMigration), old.(*svmv1.StorageVersionMigration))
	}
	main, status, err := store.New(getter, store.Spec{
		StatusMetadata: store.StatusResetsObjectMeta,
		Resource:       svmv1.Resource("storageversionmigrations"),
		Singular:       "storageversionmigration",
		NewFunc:        func() runtime.Object { return &svmv1.StorageVersionMigration{} },
		NewList:        func() runtime.Object { return &svmv1.StorageVersionMigrationList{} },
		Strategy:       s,
		StatusValidate: func(o, old runtime.Object) field.ErrorList {
			return validation.StorageVersionMigrationStatus(o.(*svmv1.StorageVersionMigration), old.(*svmv1.StorageVersionMigration))
		},
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"storageversionmigrations": main, "storageversionmigrations/status": status}, nil
}
