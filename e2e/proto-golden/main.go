// Command proto-golden prints golden test data for grid-wrapper's protobuf decoder: a few
// objects of the cached kinds, each as the apiserver's JSON serializer writes it and as its
// protobuf serializer writes it (`k8s\0` + runtime.Unknown), and one watch frame and one List
// as the apiserver frames them. Output: one record per line, tab-separated:
//
//	name  kind  hex(protobuf body)  JSON (no trailing newline)
//
// Regenerate: (cd e2e && go run ./proto-golden) > tests/proto/golden.tsv
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	jsonser "k8s.io/apimachinery/pkg/runtime/serializer/json"
	protoser "k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	pb = protoser.NewSerializer(nil, nil)
	js = jsonser.NewSerializerWithOptions(jsonser.DefaultMetaFactory, nil, nil, jsonser.SerializerOptions{})
)

func encode(obj runtime.Object) (proto []byte, json string) {
	var p, j bytes.Buffer
	if err := pb.Encode(obj, &p); err != nil {
		panic(err)
	}
	if err := js.Encode(obj, &j); err != nil {
		panic(err)
	}
	return p.Bytes(), strings.TrimSuffix(j.String(), "\n")
}

func emit(name, kind string, proto []byte, json string) {
	fmt.Printf("%s\t%s\t%s\t%s\n", name, kind, hex.EncodeToString(proto), json)
}

func object(name string, obj runtime.Object) {
	p, j := encode(obj)
	emit(name, obj.GetObjectKind().GroupVersionKind().Kind, p, j)
}

func ptr[T any](v T) *T { return &v }

func main() {
	t := metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	later := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	fields := &metav1.FieldsV1{Raw: []byte(`{"f:metadata": {"f:labels": {"f:a<b": {}}}}`)}
	meta := metav1.ObjectMeta{
		Name: "web", Namespace: "default", UID: "0b1c-2d", ResourceVersion: "12345",
		Generation: 3, CreationTimestamp: t, DeletionTimestamp: &later,
		DeletionGracePeriodSeconds: ptr(int64(30)),
		Labels:                     map[string]string{"app": "web", "z": "<&>", "a": "line\nbreak\t\"q\"\\ \u2028\b\f\x01 é"},
		Annotations:                map[string]string{"bad-utf8": "a\xffb\xe2\x82c"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
			Name: "web-1", UID: "u-2", Controller: ptr(true)}},
		Finalizers: []string{"example.com/f"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: "Update",
			APIVersion: "v1", Time: &t, FieldsType: "FieldsV1", FieldsV1: fields}},
	}
	object("service-full", &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: "TCP", Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080},
				{Name: "https", Protocol: "TCP", Port: 443, TargetPort: intstr.FromString("https"), AppProtocol: ptr("h2")},
				{Port: -1, TargetPort: intstr.FromInt32(-5)},
			},
			Selector:                      map[string]string{"app": "web"},
			ClusterIP:                     "10.0.0.10",
			ClusterIPs:                    []string{"10.0.0.10", "fd00::10"},
			Type:                          "LoadBalancer",
			ExternalIPs:                   []string{"1.2.3.4"},
			SessionAffinity:               "ClientIP",
			LoadBalancerSourceRanges:      []string{"0.0.0.0/0"},
			ExternalTrafficPolicy:         "Local",
			HealthCheckNodePort:           31000,
			PublishNotReadyAddresses:      true,
			SessionAffinityConfig:         &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(10800))}},
			IPFamilies:                    []corev1.IPFamily{"IPv4", "IPv6"},
			IPFamilyPolicy:                ptr(corev1.IPFamilyPolicy("PreferDualStack")),
			AllocateLoadBalancerNodePorts: ptr(false),
			InternalTrafficPolicy:         ptr(corev1.ServiceInternalTrafficPolicy("Cluster")),
			TrafficDistribution:           ptr("PreferClose"),
		},
		Status: corev1.ServiceStatus{
			LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
				{IP: "5.6.7.8", IPMode: ptr(corev1.LoadBalancerIPModeVIP),
					Ports: []corev1.PortStatus{{Port: 80, Protocol: "TCP", Error: ptr("")}}},
			}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: "True", ObservedGeneration: 3,
				LastTransitionTime: t, Reason: "Ok", Message: "fine"}},
		},
	})
	object("service-empty", &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "bare"},
	})
	images := []corev1.ContainerImage{}
	for i := 0; i < 3; i++ {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/img%d@sha256:%064d", i, i), fmt.Sprintf("registry.example/img%d:v%d", i, i)},
			SizeBytes: int64(123456789 * (i + 1)),
		})
	}
	object("node", &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "n-uid", ResourceVersion: "7", CreationTimestamp: t,
			Labels:      map[string]string{"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z1"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "x://n1",
			Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: "NoSchedule", TimeAdded: &later}, {Key: "k2", Effect: "NoExecute"}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi"), "pods": resource.MustParse("110")},
			Allocatable: corev1.ResourceList{"cpu": resource.MustParse("3900m"), "memory": resource.MustParse("7Gi")},
			Conditions: []corev1.NodeCondition{
				{Type: "Ready", Status: "True", LastHeartbeatTime: later, LastTransitionTime: t, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
				{Type: "MemoryPressure", Status: "False"},
			},
			Addresses:       []corev1.NodeAddress{{Type: "InternalIP", Address: "10.0.0.1"}, {Type: "Hostname", Address: "n1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: "m", SystemUUID: "s", BootID: "b", KernelVersion: "6.1",
				OSImage: "Debian", ContainerRuntimeVersion: "containerd://2.0", KubeletVersion: "v1.37.2",
				OperatingSystem: "linux", Architecture: "arm64", Swap: &corev1.NodeSwapStatus{Capacity: ptr(int64(0))}},
			Images:          images,
			RuntimeHandlers: []corev1.NodeRuntimeHandler{{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr(true), UserNamespaces: ptr(false)}}},
			Features:        &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr(true)},
		},
	})
	object("endpoints", &corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{Kind: "Endpoints", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: t},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1", NodeName: ptr("n1"),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a", UID: "p-1"}}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.0.2", Hostname: "h"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP", AppProtocol: ptr("http")}},
		}},
	})
	object("endpoints-no-subsets", &corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{Kind: "Endpoints", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: "default"},
	})
	object("slice-v1", &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default", GenerateName: "web-", Generation: 1, CreationTimestamp: t,
			Labels: map[string]string{"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
		AddressType: "IPv4",
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
				NodeName: ptr("n1"), Zone: ptr("z1"), Hostname: ptr("web-a"),
				TargetRef:          &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a", UID: "p-1"},
				Hints:              &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}, ForNodes: []discoveryv1.ForNode{{Name: "n1"}}},
				DeprecatedTopology: map[string]string{"b": "2", "a": "1"}},
			{Addresses: []string{"10.1.0.2"}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080)), AppProtocol: ptr("http")}, {Name: ptr(""), Port: ptr(int32(53))}},
	})
	object("slice-v1-empty", &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta:  metav1.ObjectMeta{Name: "web-empty", Namespace: "default"},
		AddressType: "IPv6",
	})
	object("slice-v1beta1", &discoveryv1beta1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1beta1"},
		ObjectMeta:  metav1.ObjectMeta{Name: "web-b", Namespace: "default"},
		AddressType: "FQDN",
		Endpoints: []discoveryv1beta1.Endpoint{{Addresses: []string{"a.example"}, Conditions: discoveryv1beta1.EndpointConditions{Ready: ptr(false)},
			Topology: map[string]string{"kubernetes.io/hostname": "n1"}, NodeName: ptr("n1"),
			Hints: &discoveryv1beta1.EndpointHints{ForZones: []discoveryv1beta1.ForZone{{Name: "z"}}}}},
		Ports: []discoveryv1beta1.EndpointPort{{Port: ptr(int32(80))}},
	})
	cond := []metav1.Condition{{Type: "Ready", Status: "True", LastTransitionTime: t, Reason: "R", Message: "m"}}
	object("cidr-v1", &networkingv1.ServiceCIDR{
		TypeMeta:   metav1.TypeMeta{Kind: "ServiceCIDR", APIVersion: "networking.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", CreationTimestamp: t},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.0.0.0/16", "fd00::/108"}},
		Status:     networkingv1.ServiceCIDRStatus{Conditions: cond},
	})
	object("cidr-v1beta1", &networkingv1beta1.ServiceCIDR{
		TypeMeta:   metav1.TypeMeta{Kind: "ServiceCIDR", APIVersion: "networking.k8s.io/v1beta1"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec:       networkingv1beta1.ServiceCIDRSpec{CIDRs: []string{"10.0.0.0/16"}},
	})
	status := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   "Failure", Message: "too old resource version: 1 (2)", Reason: "Expired", Code: 410,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ResourceVersionTooLarge", Message: "x"}}},
	}
	object("status", status)

	// A watch frame as the apiserver writes it: the object body (magic + Unknown) in a
	// WatchEvent's RawExtension, the WatchEvent raw, preceded by its 4-byte big-endian length.
	frame := func(name, typ string, obj runtime.Object) {
		body, j := encode(obj)
		ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: body}}
		b, err := ev.Marshal()
		if err != nil {
			panic(err)
		}
		out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
		emit(name, obj.GetObjectKind().GroupVersionKind().Kind, append(out, b...),
			fmt.Sprintf(`{"type":%q,"object":%s}`, typ, j))
	}
	frame("frame-error", "ERROR", status)
	frame("frame-bookmark", "BOOKMARK", &corev1.Service{
		TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "99",
			Annotations: map[string]string{"k8s.io/initial-events-end": "true"}},
	})

	// A List body; its items carry no TypeMeta (as the apiserver's).
	list := &discoveryv1.EndpointSliceList{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "555", Continue: "tok", RemainingItemCount: ptr(int64(2))},
		Items: []discoveryv1.EndpointSlice{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "d"}, AddressType: "IPv4"},
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "d"}, AddressType: "IPv4",
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
		},
	}
	object("list-slices", list)
	if _, err := os.Stdout.Write(nil); err != nil {
		panic(err)
	}
}
