import type { Command } from 'commander';
import type { AgentExecResponse } from '../contract/agent-exec.js';
import { success } from './responses.js';

type HelpResponse = Extract<AgentExecResponse, { type: 'help' }>;

/**
 * --help (and `help CMD`) as a response like any other, so an agent reading stdout as JSON
 * gets it too: commander's text, and the same facts laid out as fields.
 */
export function helpResponse(command: Command, text: string): HelpResponse {
  const help = command.createHelp();
  const names: string[] = [];
  for (let at: Command | null = command; at !== null; at = at.parent) names.unshift(at.name());
  return success('help', {
    command: names.join(' '),
    usage: help.commandUsage(command),
    description: help.commandDescription(command),
    commands: help.visibleCommands(command).map((sub) => ({ term: help.subcommandTerm(sub), description: help.subcommandDescription(sub) })),
    arguments: help.visibleArguments(command).map((argument) => ({ term: help.argumentTerm(argument), description: help.argumentDescription(argument) })),
    options: help.visibleOptions(command).map((option) => ({ term: help.optionTerm(option), description: help.optionDescription(option) })),
    text,
  });
}
