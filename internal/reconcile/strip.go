package reconcile

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// StripManagedFields is an informer transform (informers.WithTransform) that drops
// metadata.managedFields from objects entering a cache: they are most of an object's size,
// and no controller of ours reads them.
func StripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
