package main

func runPull(args []string) int {
	return fail(&notSupportedError{what: "kbox pull"})
}
