package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/opsfirehose/firehose/configdb"
	"github.com/opsfirehose/firehose/topics"
)

// shape is a data set: the environment's levels, the documents to load, and
// the level paths the GETs ask for.
type shape struct {
	levels []string
	docs   []configdb.PutDoc
	// nodes are the level paths of the effective GETs.
	nodes [][]topics.LevelValue
}

const resource = "astute"

func scaled(n int, scale float64) int { return max(1, int(float64(n)*scale)) }

// keyName makes distinct, uuid-like keys, as tuning-box's load test did.
func keyName(level string, i int) string {
	h := sha256.Sum256([]byte(level + strconv.Itoa(i)))
	s := hex.EncodeToString(h[:16])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// document builds a JSON object of n keys; small documents get a mix of
// value types, large ones ints as tuning-box's did.
func document(level string, n int, mixed bool) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", keyName(level, i))
		switch {
		case !mixed || i%4 == 0:
			b.WriteString(strconv.Itoa(i))
		case i%4 == 1:
			fmt.Fprintf(&b, "%q", "value-"+level+"-"+strconv.Itoa(i))
		case i%4 == 2:
			b.WriteString(`{"enabled":true,"port":8080,"hosts":["a","b"]}`)
		default:
			b.WriteString("false")
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func addr(levels ...topics.LevelValue) configdb.Address {
	return configdb.Address{Env: 1, Resource: resource, Levels: levels}
}

// smallShape: 50 keys at each of 3 levels (root, 10 racks, 100 nodes).
func smallShape(scale float64) shape {
	s := shape{levels: []string{"rack", "nodes"}}
	keys, racks, nodes := 50, scaled(10, scale), scaled(100, scale)
	s.docs = append(s.docs, configdb.PutDoc{Address: addr(), Kind: configdb.Values, Body: document("root", keys, true)})
	for r := range racks {
		rack := topics.LevelValue{Name: "rack", Value: "rack-" + strconv.Itoa(r)}
		s.docs = append(s.docs, configdb.PutDoc{Address: addr(rack), Kind: configdb.Values, Body: document("rack", keys, true)})
	}
	for n := range nodes {
		rack := topics.LevelValue{Name: "rack", Value: "rack-" + strconv.Itoa(n%racks)}
		node := topics.LevelValue{Name: "nodes", Value: "node-" + strconv.Itoa(n) + ".domain.tld"}
		s.docs = append(s.docs, configdb.PutDoc{Address: addr(rack, node), Kind: configdb.Values, Body: document("node", keys, true)})
		s.nodes = append(s.nodes, []topics.LevelValue{rack, node})
	}
	return s
}

// largeShape is tuning-box's test_get_resource_values_effective_lot_of_data
// with 100 values per level: lvl1/i and lvl1/i/lvl2/i.
func largeShape(scale float64) shape {
	s := shape{levels: []string{"lvl1", "lvl2"}}
	root, l1, l2, values := scaled(10000, scale), scaled(15000, scale), scaled(20000, scale), scaled(100, scale)
	s.docs = append(s.docs, configdb.PutDoc{Address: addr(), Kind: configdb.Values, Body: document("root", root, false)})
	doc1, doc2 := document("lvl1", l1, false), document("lvl2", l2, false)
	for i := range values {
		v := strconv.Itoa(i)
		lv1 := topics.LevelValue{Name: "lvl1", Value: v}
		lv2 := topics.LevelValue{Name: "lvl2", Value: v}
		s.docs = append(s.docs,
			configdb.PutDoc{Address: addr(lv1), Kind: configdb.Values, Body: doc1},
			configdb.PutDoc{Address: addr(lv1, lv2), Kind: configdb.Values, Body: doc2})
		s.nodes = append(s.nodes, []topics.LevelValue{lv1, lv2})
	}
	return s
}

func buildShape(name string, scale float64) (shape, error) {
	switch name {
	case "small":
		return smallShape(scale), nil
	case "large":
		return largeShape(scale), nil
	}
	return shape{}, fmt.Errorf("unknown shape %q: use small or large", name)
}
