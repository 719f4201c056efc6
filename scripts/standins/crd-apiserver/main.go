// Command crd-apiserver is a test stand-in for kflab: Kubernetes' own CustomResourceDefinition
// server (k8s.io/apiextensions-apiserver, the code kube-apiserver runs for CRDs and custom
// resources: structural schemas, pruning, CEL validation, defaulting, server-side apply, the
// status subresource, watch) on etcd, with no core API server behind it.
//
// Upstream's own entry point (apiextensions-apiserver/pkg/cmd/server: NewServerCommand, Run,
// options.Config) needs a core API server: it builds informers for Services from a kubeconfig,
// delegates authentication and authorization to it, and leaves the /apis group list to the
// aggregator. This file builds the same configuration, step by step as options.Config() does,
// with three differences, each for want of a core API:
//   - Services cannot be resolved (a conversion webhook by Service name fails with an error
//     saying so); no informers of core objects are made;
//   - a static token file (--token-auth-file, kube-apiserver's CSV format) authenticates
//     clients; the delegated authorizer's privileged group system:masters is allowed
//     everything, every other identity nothing (no RBAC here);
//   - GET /apis lists the CRDs' groups too (as the aggregator does in a cluster), so clients
//     that read the legacy APIGroupList (the Python kubernetes client) find them. Aggregated
//     discovery (kubectl) is upstream's, unchanged.
// Built by scripts/standins/40-crd-apiserver.sh from Debian's golang-k8s-*-dev sources.
package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"sync"

	"github.com/spf13/cobra"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	crdv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	crdopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/cli"
)

// noServices resolves no Service: there is no core API to read them from.
type noServices struct{}

func (noServices) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return nil, fmt.Errorf("service %s/%s:%d: this CRD-only API server has no Services", namespace, name, port)
}

// groupList serves the legacy /apis document: the server's own groups and every Established
// CRD's group with its served versions, newest first by Kubernetes' version order (as
// apiextensions' discovery controller sorts a group's versions). Filled once the server exists.
type groupList struct {
	server *apiserver.CustomResourceDefinitions
}

func (g *groupList) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	generic := g.server.GenericAPIServer
	groups, err := generic.DiscoveryGroupManager.Groups(req.Context(), req)
	if err != nil {
		responsewriters.InternalError(w, req, err)
		return
	}
	var addresses []metav1.ServerAddressByClientCIDR
	if len(groups) > 0 {
		addresses = groups[0].ServerAddressByClientCIDRs
	}
	crds, err := g.server.Informers.Apiextensions().V1().CustomResourceDefinitions().Lister().List(labels.Everything())
	if err != nil {
		responsewriters.InternalError(w, req, err)
		return
	}
	served := map[string]map[string]bool{}
	for _, crd := range crds {
		if !established(crd) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if served[crd.Spec.Group] == nil {
				served[crd.Spec.Group] = map[string]bool{}
			}
			served[crd.Spec.Group][v.Name] = true
		}
	}
	names := make([]string, 0, len(served))
	for name := range served {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		versions := make([]string, 0, len(served[name]))
		for v := range served[name] {
			versions = append(versions, v)
		}
		sort.Slice(versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0
		})
		group := metav1.APIGroup{Name: name, ServerAddressByClientCIDRs: addresses}
		for _, v := range versions {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		groups = append(groups, group)
	}
	responsewriters.WriteObjectNegotiated(apiserver.Codecs, negotiation.DefaultEndpointRestrictions, schema.GroupVersion{}, w, req, http.StatusOK, &metav1.APIGroupList{Groups: groups}, false)
}

func established(crd *crdv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == crdv1.Established {
			return c.Status == crdv1.ConditionTrue
		}
	}
	return false
}

// withGroupList answers GET /apis itself (legacy list above, aggregated list upstream's) and
// hands every other request on. It sits inside the default chain: authenticated, authorized.
func withGroupList(next http.Handler, groups *groupList) http.Handler {
	var root http.Handler
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || (req.URL.Path != "/apis" && req.URL.Path != "/apis/") {
			next.ServeHTTP(w, req)
			return
		}
		once.Do(func() { // the server exists by the time requests come
			root = aggregated.WrapAggregatedDiscoveryToHandler(groups, groups.server.GenericAPIServer.AggregatedDiscoveryGroupManager, nil)
		})
		root.ServeHTTP(w, req)
	})
}

// newConfig is upstream's options.Config() without the core API (see the file comment).
func newConfig(o *options.CustomResourceDefinitionsServerOptions, tokenFile string, groups *groupList) (*apiserver.Config, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	gc := genericserver.NewRecommendedConfig(apiserver.Codecs)
	if err := o.ServerRunOptions.ApplyTo(&gc.Config); err != nil {
		return nil, err
	}
	if err := o.RecommendedOptions.ApplyTo(gc); err != nil {
		return nil, err
	}
	if err := o.APIEnablement.ApplyTo(&gc.Config, apiserver.DefaultAPIResourceConfigSource(), apiserver.Scheme); err != nil {
		return nil, err
	}
	if tokenFile != "" {
		tokens, err := tokenfile.NewCSV(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		if gc.Authentication.Authenticator == nil {
			gc.Authentication.Authenticator = bearertoken.New(tokens)
		} else {
			gc.Authentication.Authenticator = union.New(bearertoken.New(tokens), gc.Authentication.Authenticator)
		}
	}
	// Both OpenAPI documents: the CRD OpenAPI controllers (v2 and v3, which kubectl's
	// validation and server-side apply read) run only when the v2 one is configured.
	definitions := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(crdopenapi.GetOpenAPIDefinitions)
	namer := openapinamer.NewDefinitionNamer(apiserver.Scheme, scheme.Scheme)
	gc.OpenAPIConfig = genericserver.DefaultOpenAPIConfig(definitions, namer)
	gc.OpenAPIV3Config = genericserver.DefaultOpenAPIV3Config(definitions, namer)
	gc.BuildHandlerChainFunc = func(h http.Handler, c *genericserver.Config) http.Handler {
		return genericserver.DefaultBuildHandlerChain(withGroupList(h, groups), c)
	}
	return &apiserver.Config{
		GenericConfig: gc,
		ExtraConfig: apiserver.ExtraConfig{
			CRDRESTOptionsGetter: options.NewCRDRESTOptionsGetter(*o.RecommendedOptions.Etcd, gc.ResourceTransformers, gc.StorageObjectCountTracker),
			ServiceResolver:      noServices{},
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, gc.LoopbackClientConfig, tracenoop.NewTracerProvider()),
		},
	}, nil
}

func main() {
	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	// No core API server: no informers of core objects, no admission plugins (they read
	// namespaces), no API priority and fairness (its configuration objects are core ones), and
	// no remote authentication or authorization to look up.
	o.RecommendedOptions.CoreAPI = nil
	o.RecommendedOptions.Admission = nil
	o.RecommendedOptions.Features.EnablePriorityAndFairness = false
	o.RecommendedOptions.Authentication.RemoteKubeConfigFileOptional = true
	o.RecommendedOptions.Authentication.SkipInClusterLookup = true
	o.RecommendedOptions.Authorization.RemoteKubeConfigFileOptional = true
	var tokenFile string
	groups := &groupList{}
	cmd := &cobra.Command{
		Use:   "crd-apiserver",
		Short: "Kubernetes' CustomResourceDefinition API server alone, on etcd (a kflab test stand-in)",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.ServerRunOptions.ComponentGlobalsRegistry.Set()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			cfg, err := newConfig(o, tokenFile, groups)
			if err != nil {
				return err
			}
			server, err := cfg.Complete().New(genericserver.NewEmptyDelegate())
			if err != nil {
				return err
			}
			groups.server = server
			return server.GenericAPIServer.PrepareRun().RunWithContext(c.Context())
		},
	}
	cmd.SetContext(genericserver.SetupSignalContext())
	o.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&tokenFile, "token-auth-file", "", "static bearer tokens, kube-apiserver's CSV format: token,user,uid,\"group1,group2\" (group system:masters may do anything)")
	os.Exit(cli.Run(cmd))
}
