package server

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	storagevalue "k8s.io/apiserver/pkg/storage/value"

	"github.com/nodekit/nodekit/controlplane/apiserver/scheme"
	"github.com/nodekit/nodekit/controlplane/etcd"
)

// restOptions gives every resource etcd3 storage under /registry/<resource> with a JSON codec (objects
// are stored in their external version, so etcdctl prints readable JSON) and the watch cache, and the
// value transformers of --encryption-provider-config (nil: values stored as they are).
type restOptions struct {
	config       storagebackend.Config
	transformers storagevalue.ResourceTransformers
}

// storageConfig is the etcd3 backend config under /registry for store, with no codec: the built-in
// groups and the CustomResourceDefinitions server (package crd) each set their own.
func storageConfig(store *etcd.Store) *storagebackend.Config {
	cfg := storagebackend.NewDefaultConfig("/registry", nil)
	cfg.Type = storagebackend.StorageTypeETCD3
	cfg.Transport.ServerList = store.Endpoints
	cfg.Transport.CertFile, cfg.Transport.KeyFile, cfg.Transport.TrustedCAFile = store.CertFile, store.KeyFile, store.CAFile
	return cfg
}

func newRESTOptions(store *etcd.Store, transformers storagevalue.ResourceTransformers) *restOptions {
	jsonSerializer := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	cfg := storageConfig(store)
	cfg.Codec = scheme.Codecs.CodecForVersions(jsonSerializer, jsonSerializer, scheme.GroupVersions, runtime.InternalGroupVersioner)
	cfg.EncodeVersioner = scheme.GroupVersions
	return &restOptions{config: *cfg, transformers: transformers}
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (o *restOptions) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	storage := o.config.ForResource(resource)
	if o.transformers != nil {
		storage.Transformer = o.transformers.TransformerForResource(resource)
	}
	return generic.RESTOptions{
		StorageConfig:           storage,
		Decorator:               genericregistry.StorageWithCacher(),
		DeleteCollectionWorkers: 2,
		EnableGarbageCollection: true,
		ResourcePrefix:          resource.Resource,
	}, nil
}
