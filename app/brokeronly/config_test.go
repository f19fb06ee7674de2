package brokeronly

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/config"
)

// TestBrokerConfigKnowsEverySection keeps cmd/broker's file in step with
// the bridge's: every top-level key of the bridge's file is either one the
// broker runs or one it names as bridge-only, so a section added to the
// bridge is neither refused by cmd/broker nor silently dropped.
func TestBrokerConfigKnowsEverySection(t *testing.T) {
	keys := func(t reflect.Type) []string {
		var out []string
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name != "" {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	bridge, broker := keys(reflect.TypeFor[config.Config]()), keys(reflect.TypeFor[Config]())
	if !slices.Equal(bridge, broker) {
		t.Fatalf("the bridge's sections are %v, cmd/broker knows %v", bridge, broker)
	}
	ty := reflect.TypeFor[Config]()
	for _, k := range bridgeOnlyKeys {
		found := false
		for f := range ty.Fields() {
			if strings.HasPrefix(f.Tag.Get("yaml"), k) && f.Type.Kind() == reflect.Interface {
				found = true
			}
		}
		if !found {
			t.Errorf("bridge-only key %s is not an unchecked section of Config", k)
		}
	}
}
