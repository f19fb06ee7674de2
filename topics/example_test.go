package topics_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/opsfirehose/firehose/topics"
)

func ExampleChef_RunStart() {
	t, err := topics.Chef{}.RunStart("myorg", "web/01")
	fmt.Println(t, err)
	t, err = topics.Chef{Prefix: "dc1/chef"}.RunStart("myorg", "")
	fmt.Println(t, err)
	// Output:
	// chef/myorg/web%2F01/run/start <nil>
	// dc1/chef/myorg/_/run/start <nil>
}

func ExampleLevelError() {
	_, err := topics.Chef{}.RunStart("myorg", strings.Repeat("n", 3000))
	var le *topics.LevelError
	if errors.As(err, &le) {
		fmt.Printf("field %q: %v (too long: %v)\n", le.Level, err, errors.Is(err, topics.ErrTooLong))
	}
	// Output:
	// field "node": node: level is 3000 bytes escaped, limit 1024: topic too long (too long: true)
}

func ExampleEscape() {
	fmt.Println(topics.Escape("web/01+x#"))
	fmt.Println(topics.Escape(""))
	fmt.Println(topics.Escape("_"))
	s, err := topics.Unescape("web%2F01%2Bx%23")
	fmt.Println(s, err)
	// Output:
	// web%2F01%2Bx%23
	// _
	// %5F
	// web/01+x# <nil>
}

func ExampleGerrit_Event() {
	t, _ := topics.Gerrit{}.Event("openstack/nova", "comment-added")
	fmt.Println(t)
	// Output: gerrit/openstack/nova/comment-added
}

func ExampleMatch() {
	fmt.Println(topics.Match("chef/+/+/run/#", "chef/myorg/web01/run/success"))
	fmt.Println(topics.Match("sport/#", "sport"))
	fmt.Println(topics.Match("#", "$SYS/broker/uptime"))
	// Output:
	// true
	// true
	// false
}

func ExampleToSubject() {
	s, _ := topics.ToSubject(topics.DefaultSubjectPrefix, "chef/myorg/web01.example.com/run/start")
	fmt.Println(s)
	t, _ := topics.FromSubject(topics.DefaultSubjectPrefix, s)
	fmt.Println(t)
	f, _ := topics.FilterToSubject(topics.DefaultSubjectPrefix, "chef/+/+/run/#")
	fmt.Println(f)
	// Output:
	// firehose.chef.myorg.web01//example//com.run.start
	// chef/myorg/web01.example.com/run/start
	// firehose.chef.*.*.run.>
}
