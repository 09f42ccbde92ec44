package report

import llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"

// roleName is how the title names a disaggregated node's role in lang: ""
// for a node that does both (or whose role is not known).
func roleName(role llmdiagv1.Role, lang llmdiagv1.Language) string {
	zh := lang == llmdiagv1.Language_LANGUAGE_ZH
	switch {
	case role == llmdiagv1.Role_ROLE_PREFILL && zh:
		return "Prefill 节点"
	case role == llmdiagv1.Role_ROLE_PREFILL:
		return "prefill worker"
	case role == llmdiagv1.Role_ROLE_DECODE && zh:
		return "Decode 节点"
	case role == llmdiagv1.Role_ROLE_DECODE:
		return "decode worker"
	}
	return ""
}
