module agentrunner/sandboxagent

go 1.19
