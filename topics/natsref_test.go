package topics

// This file holds nats-server's own conversion between MQTT topics and NATS
// subjects, copied with only the changes needed to compile here (constants
// inlined, a local error), so that the tests compare our mapping against the
// real thing rather than against our reading of it.
//
// Source: github.com/nats-io/nats-server/v2@v2.15.2/server/mqtt.go,
// mqttToNATSSubjectConversion and natsSubjectToMQTTTopic.
// Copyright 2020-2026 The NATS Authors, Apache License 2.0.

import (
	"errors"
	"fmt"
)

const (
	refTopicLevelSep = '/'
	refSingleLevelWC = '+'
	refMultiLevelWC  = '#'
	refPWC           = '*'
	refFWC           = '>'
	refBtsep         = '.'
)

var errRefUnsupportedCharacters = errors.New("invalid character in MQTT topic")

func refMQTTToNATSSubjectConversion(mt []byte, wcOk bool) ([]byte, error) {
	var cp bool
	var j int
	res := mt

	makeCopy := func(i int) {
		cp = true
		res = make([]byte, 0, len(mt)+10)
		if i > 0 {
			res = append(res, mt[:i]...)
		}
	}

	end := len(mt) - 1
	for i := 0; i < len(mt); i++ {
		switch mt[i] {
		case refTopicLevelSep:
			if i == 0 || res[j-1] == refBtsep {
				if !cp {
					makeCopy(0)
				}
				res = append(res, refTopicLevelSep, refBtsep)
				j++
			} else if i == end || mt[i+1] == refTopicLevelSep {
				if !cp {
					makeCopy(i)
				}
				res = append(res, refBtsep, refTopicLevelSep)
				j++
			} else {
				if !cp {
					makeCopy(i)
				}
				res = append(res, refBtsep)
			}
		case ' ', '\t', '\n', '\r', '\f':
			return nil, errRefUnsupportedCharacters
		case 0x7f:
			return nil, errRefUnsupportedCharacters
		case refBtsep:
			if !cp {
				makeCopy(i)
			}
			res = append(res, refTopicLevelSep, refTopicLevelSep)
			j++
		case refSingleLevelWC, refMultiLevelWC:
			if !wcOk {
				return nil, fmt.Errorf("wildcards not allowed in publish's topic: %q", mt)
			}
			if !cp {
				makeCopy(i)
			}
			if mt[i] == refSingleLevelWC {
				res = append(res, refPWC)
			} else {
				res = append(res, refFWC)
			}
		default:
			if cp {
				res = append(res, mt[i])
			}
		}
		j++
	}
	if cp && res[j-1] == refBtsep {
		res = append(res, refTopicLevelSep)
		j++
	}
	return res[:j], nil
}

func refNATSSubjectToMQTTTopic(subject []byte) []byte {
	topic := make([]byte, len(subject))
	end := len(subject) - 1
	var j int
	for i := 0; i < len(subject); i++ {
		switch subject[i] {
		case refTopicLevelSep:
			if i < end {
				switch c := subject[i+1]; c {
				case refBtsep, refTopicLevelSep:
					if c == refBtsep {
						topic[j] = refTopicLevelSep
					} else {
						topic[j] = refBtsep
					}
					j++
					i++
				default:
				}
			}
		case refBtsep:
			topic[j] = refTopicLevelSep
			j++
		default:
			topic[j] = subject[i]
			j++
		}
	}
	return topic[:j]
}

// natsServerMaps reports whether s is inside the domain where our mapping must
// equal nats-server's exactly: no byte that the percent layer touches.
func natsServerMaps(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '%' || c == '*' || c == '>' {
			return false
		}
	}
	return true
}
