//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-transparent/ovn-transparent/internal/testing/poll"
	"github.com/ovn-transparent/ovn-transparent/test/harness"
	"github.com/ovn-transparent/ovn-transparent/test/images"
)

// ExternalZone is the DNS zone the external host serves, the "outside world" pods resolve
// through cluster DNS; ExternalName is a name in it for the external host itself.
const (
	ExternalZone = "example.test"
	ExternalName = "www.example.test"
)

// PublicName and PublicAddr are the one record of the Internet the upstream e2e suite looks
// up through cluster DNS (its PTR forwarding test first wants 8.8.8.8 to reverse-resolve
// to dns.google, "without explicit upstream nameserver set"). The test network has no
// Internet, so the external host, which stands in for the cluster's upstream resolvers,
// serves it; no packet reaches that address.
const (
	PublicName = "dns.google"
	PublicAddr = "8.8.8.8"
)

// startExternalDNS runs CoreDNS on the external host, the cluster's upstream resolver:
// authoritative for ExternalZone, PublicName and PublicAddr's reverse (PTR) name; it
// refuses other names. (Reverse lookups of the external host's own address do not get
// here: it is the kubernetes Service's endpoint, which cluster DNS answers itself.)
func (c *Cluster) startExternalDNS(ctx context.Context) error {
	bin, err := harness.EnsureCoreDNS(ctx, c.Run.Logf)
	if err != nil {
		return err
	}
	dir := c.Run.Path("external-dns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	corefile := fmt.Sprintf(`%s:53 %s:53 %s:53 {
    bind %s
    hosts {
        %s %s
        %s %s
    }
    errors
}
`, ExternalZone, PublicName, reverseName(PublicAddr), c.External.IP, c.External.IP, ExternalName, PublicAddr, PublicName)
	if err := os.WriteFile(filepath.Join(dir, "Corefile"), []byte(corefile), 0o644); err != nil {
		return err
	}
	_, err = c.Run.Start(harness.ProcSpec{Name: "external-dns", Netns: c.External.Netns, Path: bin,
		Args: []string{"-conf", filepath.Join(dir, "Corefile")}, Dir: dir})
	return err
}

// reverseName is the in-addr.arpa name of an IPv4 address: 10.1.2.3 -> 3.2.1.10.in-addr.arpa.
func reverseName(ip string) string {
	b := net.ParseIP(ip).To4()
	return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa", b[3], b[2], b[1], b[0])
}

// deployDNS runs cluster DNS as kubeadm (v1.34) installs it: CoreDNS as the Deployment
// "coredns" in kube-system, pods labelled k8s-app=kube-dns, behind the kube-dns Service at
// ClusterDNS, with the RBAC of the upstream manifest and kubeadm's Corefile in the ConfigMap
// "coredns" (the upstream DNS tests rewrite it and delete the pods, or wait for reload).
// Two differences: other names are forwarded to the external host rather than to the
// node's /etc/resolv.conf (the machine's, which pods cannot reach), and one replica runs
// instead of two. It returns once the Deployment is available.
func (c *Cluster) deployDNS(ctx context.Context) error {
	client := c.Kube.Client()
	const ns, name = "kube-system", "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	objs := []func() error{
		func() error {
			_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
					{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string]string{"Corefile": fmt.Sprintf(`.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    forward . %s {
        max_concurrent 1000
    }
    cache 30 {
        disable success cluster.local
        disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`, c.External.IP)},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{
					ClusterIP: ClusterDNS, Selector: labels,
					Ports: []corev1.ServicePort{
						{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
						{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
						{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			one := int32(1)
			_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: &one,
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							ServiceAccountName: name,
							DNSPolicy:          corev1.DNSDefault,
							Containers: []corev1.Container{{
								Name: "coredns", Image: images.CoreDNS, Args: []string{"-conf", "/etc/coredns/Corefile"},
								Ports: []corev1.ContainerPort{
									{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
									{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
									{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
									{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
									{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
								},
								VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
								ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
									HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("readiness-probe")}}, PeriodSeconds: 2},
								LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
									HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("liveness-probe")}},
									InitialDelaySeconds: 60, FailureThreshold: 5},
								SecurityContext: &corev1.SecurityContext{
									AllowPrivilegeEscalation: new(bool), ReadOnlyRootFilesystem: ptr(true),
									Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
								},
							}},
							Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}},
						},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			return fmt.Errorf("cluster DNS: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return poll.Until(ctx, "CoreDNS available", 200*time.Millisecond, func() (bool, error) {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas > 0, nil
	})
}

func ptr[T any](v T) *T { return &v }
