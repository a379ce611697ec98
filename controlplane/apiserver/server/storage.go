package server

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/nodekit/nodekit/controlplane/apiserver/scheme"
	"github.com/nodekit/nodekit/controlplane/etcd"
)

// restOptions gives every resource etcd3 storage under /registry/<resource> with a JSON codec (objects
// are stored in their external version, so etcdctl prints readable JSON) and the watch cache.
type restOptions struct {
	config storagebackend.Config
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

func newRESTOptions(store *etcd.Store) *restOptions {
	jsonSerializer := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	cfg := storageConfig(store)
	cfg.Codec = scheme.Codecs.CodecForVersions(jsonSerializer, jsonSerializer, scheme.GroupVersions, runtime.InternalGroupVersioner)
	cfg.EncodeVersioner = scheme.GroupVersions
	return &restOptions{config: *cfg}
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (o *restOptions) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig:           o.config.ForResource(resource),
		Decorator:               genericregistry.StorageWithCacher(),
		DeleteCollectionWorkers: 2,
		EnableGarbageCollection: true,
		ResourcePrefix:          resource.Resource,
	}, nil
}
