// Command pb-compare checks that what grid-wrapper sends kube-proxy in protobuf is, byte for byte,
// what the apiserver would send it, once grid-wrapper's documented changes are applied
// (docs/SEMANTICS.md): its own resourceVersions, no managedFields, and for a topology Service's
// EndpointSlices only the endpoints on nodes that share a topology key's value with the local node.
//
// For each resource it GETs kube-proxy's own LIST (its selectors, Accept:
// application/vnd.kubernetes.protobuf, */*) from the apiserver and from grid-wrapper. The
// apiserver's answer is decoded by the apiserver's protobuf serializer into typed objects; each
// item gets grid-wrapper's item's resourceVersion, loses its managedFields, and for a topology
// Service's slice keeps the endpoints the rule above keeps, computed here from the Nodes' labels
// as the apiserver has them (not from grid-wrapper's answer). The result is encoded by the same
// serializer and its items compared with the raw item bytes grid-wrapper sent (the List's
// `items` fields, split by hand), then the whole answers. Then kube-proxy's watch from
// resourceVersion 0, for a second: each initial ADDED event's object (its own `k8s\0` envelope) is
// compared with the same expected object encoded alone. Any difference prints the object, the
// first differing offset and both decoded objects as JSON, and the exit status is 1 (2 when
// something could not be fetched or decoded).
//
// It knows the strict topology rule only (the `topologyKeys` annotation with plain keys, OR):
// a Service with a `*` key, `topologyMode` or OpenYurt's annotation is refused (exit 2), and so
// is a slice with the `default/kubernetes` rewrite's annotation. The edge-health filter and the
// container runtime's repairs are not modelled either: they show up as differences.
//
// usage: pb-compare -apiserver URL -apiserver-ca FILE -token-file FILE -gw URL [-gw-ca FILE]
//
//	-node NAME -resources endpointslices,services,nodes,servicecidrs
//	[-min-pruned N] [-min-unpruned N] [-wait DURATION] [-no-prune]
//
// -no-prune compares against the apiserver's slices unpruned: the negative control, which must
// report a difference on every slice grid-wrapper prunes.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	protoser "k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

const accept = "application/vnd.kubernetes.protobuf, */*" // kube-proxy's (client-go's protobuf config)

var pb = protoser.NewSerializer(scheme.Scheme, scheme.Scheme)

// A resource as kube-proxy 1.37 lists it (cmd/kube-proxy/app/server.go's informer factories).
type resource struct {
	name    string
	path    string // with kube-proxy's query; %s is the local node's name
	newList func() runtime.Object
	newItem func() runtime.Object
}

var resources = map[string]resource{
	"endpointslices": {"endpointslices",
		"/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless&limit=500&resourceVersion=0",
		func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		func() runtime.Object { return &discoveryv1.EndpointSlice{} }},
	"services": {"services",
		"/api/v1/services?fieldSelector=spec.clusterIP%21%3DNone&labelSelector=%21service.kubernetes.io%2Fservice-proxy-name&limit=500&resourceVersion=0",
		func() runtime.Object { return &corev1.ServiceList{} },
		func() runtime.Object { return &corev1.Service{} }},
	"nodes": {"nodes",
		"/api/v1/nodes?fieldSelector=metadata.name%3D{node}&limit=500&resourceVersion=0",
		func() runtime.Object { return &corev1.NodeList{} },
		func() runtime.Object { return &corev1.Node{} }},
	"servicecidrs": {"servicecidrs",
		"/apis/networking.k8s.io/v1/servicecidrs?limit=500&resourceVersion=0",
		func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		func() runtime.Object { return &networkingv1.ServiceCIDR{} }},
}

type server struct {
	base   string
	token  string
	client *http.Client
}

func newServer(base, caFile, token string) (*server, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{}}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", caFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &server{base: strings.TrimSuffix(base, "/"), token: token, client: &http.Client{Transport: tr, Timeout: 15 * time.Second}}, nil
}

// get returns the body of a 200 protobuf answer (gzip, when the server chose it, undone by Go's
// transport, which asked for it).
func (s *server) get(path string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %s: %.200q", s.base, path, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") {
		return nil, fmt.Errorf("GET %s%s: Content-Type %q, not protobuf", s.base, path, ct)
	}
	return body, nil
}

// --- the wire format, read by hand ---------------------------------------------------------

func varint(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("bad varint")
}

type field struct {
	num  uint64
	data []byte // a length-delimited field's payload
}

// fields splits a message into its fields; only length-delimited ones are expected here.
func fields(msg []byte) ([]field, error) {
	var out []field
	for len(msg) > 0 {
		tag, n, err := varint(msg)
		if err != nil {
			return nil, err
		}
		msg = msg[n:]
		if tag&7 != 2 {
			return nil, fmt.Errorf("field %d: wire type %d, not length-delimited", tag>>3, tag&7)
		}
		l, n, err := varint(msg)
		if err != nil {
			return nil, err
		}
		msg = msg[n:]
		if uint64(len(msg)) < l {
			return nil, fmt.Errorf("field %d: %d bytes, %d left", tag>>3, l, len(msg))
		}
		out = append(out, field{tag >> 3, msg[:l]})
		msg = msg[l:]
	}
	return out, nil
}

// listItems takes a complete protobuf answer apart: `k8s\0`, runtime.Unknown (typeMeta 1, raw 2,
// contentEncoding 3, contentType 4), and in raw the List (metadata 1, items 2).
func listItems(body []byte) ([][]byte, error) {
	if !bytes.HasPrefix(body, []byte("k8s\x00")) {
		return nil, fmt.Errorf("no k8s\\0 magic: % x", body[:min(len(body), 8)])
	}
	unk, err := fields(body[4:])
	if err != nil {
		return nil, fmt.Errorf("runtime.Unknown: %w", err)
	}
	var raw []byte
	for _, f := range unk {
		if f.num == 2 {
			raw = f.data
		}
	}
	list, err := fields(raw)
	if err != nil {
		return nil, fmt.Errorf("List: %w", err)
	}
	var items [][]byte
	for _, f := range list {
		if f.num == 2 {
			items = append(items, f.data)
		}
	}
	return items, nil
}

// --- the topology rule, from the apiserver's Nodes and Services ----------------------------

type topology struct {
	local  string
	labels map[string]map[string]string // node name -> labels
	keys   map[string][]string          // "ns/name" of a topology Service -> its keys
}

func fetchTopology(api *server, local string) (*topology, error) {
	t := &topology{local: local, labels: map[string]map[string]string{}, keys: map[string][]string{}}
	var nodes corev1.NodeList
	if err := decodeList(api, "/api/v1/nodes", &nodes); err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		t.labels[n.Name] = n.Labels
	}
	var svcs corev1.ServiceList
	if err := decodeList(api, "/api/v1/services", &svcs); err != nil {
		return nil, err
	}
	for _, s := range svcs.Items {
		key := s.Namespace + "/" + s.Name
		for _, a := range []string{"topologyMode", "openyurt.io/topologyKeys"} {
			if _, ok := s.Annotations[a]; ok {
				return nil, fmt.Errorf("Service %s: annotation %s is not modelled here", key, a)
			}
		}
		v, ok := s.Annotations["topologyKeys"]
		if !ok {
			continue
		}
		var keys []string
		if err := json.Unmarshal([]byte(v), &keys); err != nil {
			return nil, fmt.Errorf("Service %s: topologyKeys %q is not a list of strings (not modelled here)", key, v)
		}
		for _, k := range keys {
			if k == "*" {
				return nil, fmt.Errorf("Service %s: topologyKeys %q has a fallback (not modelled here)", key, v)
			}
		}
		if len(keys) > 0 {
			t.keys[key] = keys
		}
	}
	return t, nil
}

func decodeList(s *server, path string, into runtime.Object) error {
	body, err := s.get(path)
	if err != nil {
		return err
	}
	if _, _, err := pb.Decode(body, nil, into); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// kept: both nodes known and sharing one of the keys with an equal value (SEMANTICS §2.3).
func (t *topology) kept(keys []string, node string) bool {
	local, ok := t.labels[t.local]
	if !ok {
		return false
	}
	there, ok := t.labels[node]
	if !ok {
		return false
	}
	for _, k := range keys {
		a, okA := local[k]
		b, okB := there[k]
		if okA && okB && a == b {
			return true
		}
	}
	return false
}

// prune applies the rule to a slice of a topology Service; it returns how many endpoints went.
func (t *topology) prune(s *discoveryv1.EndpointSlice) int {
	keys := t.keys[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]]
	if keys == nil || s.Labels[discoveryv1.LabelServiceName] == "" {
		return 0
	}
	kept := []discoveryv1.Endpoint{}
	for _, e := range s.Endpoints {
		node := ""
		if e.NodeName != nil {
			node = *e.NodeName
		} else if h, ok := e.DeprecatedTopology[corev1.LabelHostname]; ok {
			node = h
		}
		if node != "" && t.kept(keys, node) {
			kept = append(kept, e)
		}
	}
	gone := len(s.Endpoints) - len(kept)
	s.Endpoints = kept
	return gone
}

// --- the comparison -------------------------------------------------------------------------

type result struct {
	diffs   []string
	summary string
	pruned  int
	whole   int
	managed int // items whose managedFields were dropped
}

// expect is what grid-wrapper documents it serves for the apiserver's o: its own resourceVersion,
// no managedFields, a topology Service's slice pruned (unless noPrune). And how many endpoints
// went.
func expect(o runtime.Object, rv string, topo *topology, noPrune bool) (runtime.Object, int) {
	o = o.DeepCopyObject()
	a, _ := meta.Accessor(o)
	a.SetResourceVersion(rv)
	a.SetManagedFields(nil)
	gone := 0
	if s, ok := o.(*discoveryv1.EndpointSlice); ok && !noPrune {
		gone = topo.prune(s)
	}
	return o, gone
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// unmarshal decodes a list item's bytes, as JSON for the report.
func unmarshal(b []byte, newItem func() runtime.Object) string {
	o := newItem()
	u, ok := o.(interface{ Unmarshal([]byte) error })
	if !ok {
		return "(not a protobuf message)"
	}
	if err := u.Unmarshal(b); err != nil {
		return "(does not decode: " + err.Error() + ")"
	}
	return asJSON(o)
}

// describe says where got and exp, the bytes of one object, first differ, with both decoded.
func describe(what string, got, exp []byte, gotJSON string, expObj runtime.Object) string {
	at := firstDiff(got, exp)
	return fmt.Sprintf("%s: grid-wrapper's %d bytes differ from the expected %d at offset %d\n"+
		"  grid-wrapper %s\n  expected     %s\n  grid-wrapper's, decoded: %s\n  expected, decoded:       %s",
		what, len(got), len(exp), at, window(got, at), window(exp, at), gotJSON, asJSON(expObj))
}

func keyOf(o runtime.Object) string {
	a, err := meta.Accessor(o)
	if err != nil {
		return "?"
	}
	if a.GetNamespace() == "" {
		return a.GetName()
	}
	return a.GetNamespace() + "/" + a.GetName()
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func window(b []byte, at int) string {
	lo, hi := max(0, at-8), min(len(b), at+24)
	return fmt.Sprintf("[%d:%d] %s", lo, hi, hex.EncodeToString(b[lo:hi]))
}

func asJSON(o runtime.Object) string {
	j, err := json.Marshal(o)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(j)
}

func compare(r resource, api, gw *server, topo *topology, node string, noPrune bool) (*result, error) {
	path := strings.ReplaceAll(r.path, "{node}", url.QueryEscape(node))
	apiBody, err := api.get(path)
	if err != nil {
		return nil, err
	}
	gwBody, err := gw.get(path)
	if err != nil {
		return nil, err
	}
	apiList := r.newList()
	if _, _, err := pb.Decode(apiBody, nil, apiList); err != nil {
		return nil, fmt.Errorf("the apiserver's %s: %w", r.name, err)
	}
	gwList := r.newList()
	if _, _, err := pb.Decode(gwBody, nil, gwList); err != nil {
		return nil, fmt.Errorf("grid-wrapper's %s: %w", r.name, err)
	}
	gwRaw, err := listItems(gwBody)
	if err != nil {
		return nil, fmt.Errorf("grid-wrapper's %s: %w", r.name, err)
	}
	gwItems, err := meta.ExtractList(gwList)
	if err != nil {
		return nil, err
	}
	if len(gwItems) != len(gwRaw) {
		return nil, fmt.Errorf("grid-wrapper's %s: %d items decoded, %d split", r.name, len(gwItems), len(gwRaw))
	}
	gwAt := map[string]int{}
	for i, o := range gwItems {
		gwAt[keyOf(o)] = i
	}
	apiItems, err := meta.ExtractList(apiList)
	if err != nil {
		return nil, err
	}

	res := &result{}
	apiAt := map[string]runtime.Object{}
	var expected []runtime.Object
	var pruned, unpruned, missing []string
	seen := map[string]bool{}
	for _, o := range apiItems {
		k := keyOf(o)
		seen[k] = true
		i, ok := gwAt[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		a, _ := meta.Accessor(o)
		if len(a.GetManagedFields()) > 0 {
			res.managed++
		}
		if _, ok := a.GetAnnotations()["superedge.io/local-endpoint"]; ok {
			return nil, fmt.Errorf("%s %s: the default/kubernetes rewrite's annotation is not modelled here", r.name, k)
		}
		apiAt[k] = o
		g, _ := meta.Accessor(gwItems[i])
		o, gone := expect(o, g.GetResourceVersion(), topo, noPrune)
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			if gone > 0 || (noPrune && topo.keys[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]] != nil) {
				pruned = append(pruned, fmt.Sprintf("%s (%d of %d endpoints kept)", k, len(s.Endpoints), len(s.Endpoints)+gone))
			} else {
				unpruned = append(unpruned, k)
			}
		}
		expected = append(expected, o)
	}
	var extra []string
	for k := range gwAt {
		if !seen[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		res.diffs = append(res.diffs, fmt.Sprintf("%s: not served by grid-wrapper: %v; served but not listed by the apiserver: %v", r.name, missing, extra))
	}

	// The expected answer, encoded by the apiserver's serializer: the apiserver's List with the
	// items changed as grid-wrapper documents and grid-wrapper's list resourceVersion.
	want := r.newList()
	if err := meta.SetList(want, expected); err != nil {
		return nil, err
	}
	wl, _ := meta.ListAccessor(want)
	gl, _ := meta.ListAccessor(gwList)
	wl.SetResourceVersion(gl.GetResourceVersion())
	gvks, _, err := scheme.Scheme.ObjectKinds(want)
	if err != nil {
		return nil, err
	}
	want.GetObjectKind().SetGroupVersionKind(gvks[0])
	var buf bytes.Buffer
	if err := pb.Encode(want, &buf); err != nil {
		return nil, err
	}
	wantBody := buf.Bytes()
	wantRaw, err := listItems(wantBody)
	if err != nil {
		return nil, fmt.Errorf("the expected %s: %w", r.name, err)
	}

	total := 0
	for j, o := range expected {
		k := keyOf(o)
		got, exp := gwRaw[gwAt[k]], wantRaw[j]
		total += len(got)
		if !bytes.Equal(got, exp) {
			res.diffs = append(res.diffs, describe(r.name+" "+k, got, exp, unmarshal(got, r.newItem), o))
		}
	}
	if len(res.diffs) == 0 && !bytes.Equal(gwBody, wantBody) {
		at := firstDiff(gwBody, wantBody)
		res.diffs = append(res.diffs, fmt.Sprintf("%s: every item identical, the whole answers differ (%d and %d bytes) at offset %d\n  grid-wrapper %s\n  expected     %s",
			r.name, len(gwBody), len(wantBody), at, window(gwBody, at), window(wantBody, at)))
	}
	watched, err := compareWatch(r, path, apiAt, gw, topo, noPrune, res)
	if err != nil {
		return nil, err
	}
	res.pruned, res.whole = len(pruned), len(unpruned)
	res.summary = fmt.Sprintf("%s: %s (managedFields dropped from %d), %d bytes, each byte for byte as expected; the whole list (%d bytes) too; a watch's %s too",
		r.name, plural(len(expected), "item", "items"), res.managed, total, len(gwBody), plural(watched, "initial ADDED event", "initial ADDED events"))
	if _, ok := apiList.(*discoveryv1.EndpointSliceList); ok {
		res.summary += fmt.Sprintf("; pruned: %s; unpruned: %s", strings.Join(pruned, ", "), strings.Join(unpruned, ", "))
	}
	return res, nil
}

// compareWatch opens kube-proxy's watch from resourceVersion 0 on grid-wrapper for a second and
// compares the object of each initial ADDED event (`k8s\0` + runtime.Unknown, as in a complete
// answer) with the apiserver's object, changed as for the list (its resourceVersion the event's),
// encoded alone by the same serializer. Frames: a 4-byte big-endian length, then a
// meta.v1.WatchEvent (type 1, object 2: a RawExtension, raw 1).
func compareWatch(r resource, listPath string, apiAt map[string]runtime.Object, gw *server, topo *topology, noPrune bool, res *result) (int, error) {
	path := strings.Replace(listPath, "limit=500&", "", 1) + "&allowWatchBookmarks=true&timeoutSeconds=1&watch=true"
	body, err := gw.get(path)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	n := 0
	for len(body) > 0 {
		if len(body) < 4 || uint64(len(body)-4) < uint64(binary.BigEndian.Uint32(body)) {
			return 0, fmt.Errorf("grid-wrapper's %s watch: a truncated frame", r.name)
		}
		frame := body[4 : 4+binary.BigEndian.Uint32(body)]
		body = body[4+len(frame):]
		fs, err := fields(frame)
		if err != nil {
			return 0, fmt.Errorf("grid-wrapper's %s watch: WatchEvent: %w", r.name, err)
		}
		var typ string
		var raw []byte
		for _, f := range fs {
			switch f.num {
			case 1:
				typ = string(f.data)
			case 2:
				ext, err := fields(f.data)
				if err != nil {
					return 0, fmt.Errorf("grid-wrapper's %s watch: RawExtension: %w", r.name, err)
				}
				for _, e := range ext {
					if e.num == 1 {
						raw = e.data
					}
				}
			}
		}
		if typ == "BOOKMARK" {
			continue
		}
		got := r.newItem()
		if _, _, err := pb.Decode(raw, nil, got); err != nil {
			return 0, fmt.Errorf("grid-wrapper's %s watch: a %s event's object: %w", r.name, typ, err)
		}
		k := keyOf(got)
		if typ != "ADDED" || seen[k] {
			res.diffs = append(res.diffs, fmt.Sprintf("%s watch: %s %s, not one initial ADDED per object", r.name, typ, k))
			continue
		}
		seen[k] = true
		n++
		o, ok := apiAt[k]
		if !ok {
			res.diffs = append(res.diffs, fmt.Sprintf("%s watch: ADDED %s, not listed by the apiserver", r.name, k))
			continue
		}
		g, _ := meta.Accessor(got)
		o, _ = expect(o, g.GetResourceVersion(), topo, noPrune)
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		if err != nil {
			return 0, err
		}
		o.GetObjectKind().SetGroupVersionKind(gvks[0])
		var buf bytes.Buffer
		if err := pb.Encode(o, &buf); err != nil {
			return 0, err
		}
		if !bytes.Equal(raw, buf.Bytes()) {
			res.diffs = append(res.diffs, describe(r.name+" watch ADDED "+k+" (k8s\\0 + runtime.Unknown)", raw, buf.Bytes(), asJSON(got), o))
		}
	}
	for k := range apiAt {
		if !seen[k] {
			res.diffs = append(res.diffs, fmt.Sprintf("%s watch: no initial ADDED for %s", r.name, k))
		}
	}
	return n, nil
}

func main() {
	apiURL := flag.String("apiserver", "", "the apiserver's URL")
	apiCA := flag.String("apiserver-ca", "", "its CA bundle")
	tokenFile := flag.String("token-file", "", "a bearer token for the apiserver (one that may list Nodes and Services)")
	gwURL := flag.String("gw", "", "grid-wrapper's kube-proxy port's URL")
	gwCA := flag.String("gw-ca", "", "its CA bundle, for https")
	node := flag.String("node", "", "the local node (grid-wrapper's --hostname)")
	list := flag.String("resources", "endpointslices,services,nodes", "comma-separated: endpointslices, services, nodes, servicecidrs")
	minPruned := flag.Int("min-pruned", 0, "at least this many slices pruned")
	minWhole := flag.Int("min-unpruned", 0, "at least this many slices unpruned")
	wait := flag.Duration("wait", 0, "retry until equal for this long (grid-wrapper follows the apiserver's changes)")
	noPrune := flag.Bool("no-prune", false, "expect the apiserver's slices unpruned (the negative control: must fail on a pruned slice)")
	flag.Parse()
	if *apiURL == "" || *gwURL == "" || *node == "" || *tokenFile == "" {
		fmt.Fprintln(os.Stderr, "pb-compare: -apiserver, -token-file, -gw and -node are required")
		os.Exit(2)
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pb-compare:", err)
		os.Exit(2)
	}
	api, err := newServer(*apiURL, *apiCA, strings.TrimSpace(string(tok)))
	if err == nil {
		var gw *server
		gw, err = newServer(*gwURL, *gwCA, "")
		if err == nil {
			os.Exit(run(api, gw, *node, strings.Split(*list, ","), *minPruned, *minWhole, *wait, *noPrune))
		}
	}
	fmt.Fprintln(os.Stderr, "pb-compare:", err)
	os.Exit(2)
}

// run compares every resource, again until all agree or the wait is over; prints the last
// attempt's outcome. 0: identical; 1: a difference; 2: an error.
func run(api, gw *server, node string, names []string, minPruned, minWhole int, wait time.Duration, noPrune bool) int {
	deadline := time.Now().Add(wait)
	for attempt := 1; ; attempt++ {
		var lines, diffs []string
		var failure error
		topo, err := fetchTopology(api, node)
		if err != nil {
			failure = err
		}
		for _, n := range names {
			if failure != nil {
				break
			}
			r, ok := resources[n]
			if !ok {
				fmt.Fprintf(os.Stderr, "pb-compare: unknown resource %q\n", n)
				return 2
			}
			res, err := compare(r, api, gw, topo, node, noPrune)
			if err != nil {
				failure = err
				break
			}
			if r.name == "endpointslices" && len(res.diffs) == 0 && (res.pruned < minPruned || res.whole < minWhole) {
				res.diffs = append(res.diffs, fmt.Sprintf("endpointslices: %d pruned and %d unpruned slices compared, want at least %d and %d", res.pruned, res.whole, minPruned, minWhole))
			}
			diffs = append(diffs, res.diffs...)
			lines = append(lines, res.summary)
		}
		if failure == nil && len(diffs) == 0 {
			for _, l := range lines {
				fmt.Println(l)
			}
			if attempt > 1 {
				fmt.Printf("(identical at attempt %d)\n", attempt)
			}
			return 0
		}
		if time.Now().After(deadline) {
			if failure != nil {
				fmt.Fprintln(os.Stderr, "pb-compare:", failure)
				return 2
			}
			fmt.Printf("DIFFERENT (attempt %d):\n", attempt)
			for _, d := range diffs {
				fmt.Println(d)
			}
			return 1
		}
		time.Sleep(time.Second)
	}
}
