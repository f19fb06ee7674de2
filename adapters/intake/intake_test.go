package intake

import (
	"strings"
	"testing"

	"github.com/opsfirehose/firehose/httpserver"
)

func TestValidateNamesEveryBadKey(t *testing.T) {
	c := Config{Enabled: true, TopicPrefix: "a/+", MaxBody: 0, Tokens: []httpserver.Token{{Name: "ok", Token: "x"}, {Name: "empty"}}}
	err := c.Validate()
	for _, key := range []string{"topic_prefix", "max_body", "tokens[1].token"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error %v does not name %s", err, key)
		}
	}
	if strings.Contains(err.Error(), "tokens[0]") {
		t.Errorf("a good token was reported: %v", err)
	}
	good := Config{Enabled: true, TopicPrefix: "gerrit", MaxBody: 1}
	if err := good.Validate(); err != nil {
		t.Errorf("a good section: %v", err)
	}
}
