package crd

import (
	"fmt"
	"maps"
	"strings"

	restful "github.com/emicklei/go-restful/v3"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// ShareOpenAPI makes the top server's /openapi/v2 and /openapi/v3 the ones the library's CRD OpenAPI
// controllers update, so `kubectl explain <plural>` reads a custom resource's schema from the one API
// server: the apiextensions.k8s.io group's own paths and definitions are merged in (the top server
// serves /openapi itself, so the delegate's documents would never be reached). Call it after top's
// PrepareRun (which builds both documents) and before Run (whose post-start hooks start the
// controllers).
func (s *Server) ShareOpenAPI(top *genericapiserver.GenericAPIServer) error {
	ext := s.ext.GenericAPIServer
	if top.StaticOpenAPISpec != nil && ext.StaticOpenAPISpec != nil && top.OpenAPIVersionedService != nil {
		merged := mergeSwagger(top.StaticOpenAPISpec, ext.StaticOpenAPISpec)
		if err := top.OpenAPIVersionedService.UpdateSpec(merged); err != nil {
			return fmt.Errorf("apiextensions: openapi v2: %w", err)
		}
		ext.StaticOpenAPISpec, ext.OpenAPIVersionedService = merged, top.OpenAPIVersionedService
	}
	if top.OpenAPIV3VersionedService != nil {
		for _, ws := range ext.Handler.GoRestfulContainer.RegisteredWebServices() {
			if !strings.HasPrefix(ws.RootPath(), "/apis/") {
				continue
			}
			doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), s.v3)
			if err != nil {
				return fmt.Errorf("apiextensions: openapi v3 %s: %w", ws.RootPath(), err)
			}
			top.OpenAPIV3VersionedService.UpdateGroupVersion(strings.TrimPrefix(ws.RootPath(), "/"), doc)
		}
		ext.OpenAPIV3VersionedService = top.OpenAPIV3VersionedService
	}
	return nil
}

// mergeSwagger returns a copy of base with extra's paths and definitions added (base wins on a clash).
func mergeSwagger(base, extra *spec.Swagger) *spec.Swagger {
	out := *base
	out.SwaggerProps.Definitions = maps.Clone(base.Definitions)
	if out.Definitions == nil {
		out.Definitions = spec.Definitions{}
	}
	for k, v := range extra.Definitions {
		if _, ok := out.Definitions[k]; !ok {
			out.Definitions[k] = v
		}
	}
	paths := &spec.Paths{Paths: map[string]spec.PathItem{}}
	if base.Paths != nil {
		paths.VendorExtensible = base.Paths.VendorExtensible
		maps.Copy(paths.Paths, base.Paths.Paths)
	}
	if extra.Paths != nil {
		for k, v := range extra.Paths.Paths {
			if _, ok := paths.Paths[k]; !ok {
				paths.Paths[k] = v
			}
		}
	}
	out.Paths = paths
	return &out
}
