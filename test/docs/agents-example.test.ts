import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// docs/agents.md shows agents/research.ts "whole": the file is the one the tests run (test/agents/llm-loop.test.ts)
// and the type-check compiles, so the page's copy must be that file, character for character.
describe('docs/agents.md', () => {
  it('shows agents/research.ts as it is', () => {
    const page = readFileSync('docs/agents.md', 'utf8');
    const shown = /This agent is `agents\/research\.ts`, whole:\n\n```ts\n([\s\S]*?)```/.exec(page)?.[1];
    expect(shown, 'the block after "This agent is `agents/research.ts`, whole:"').toBeDefined();
    expect(shown).toBe(readFileSync('agents/research.ts', 'utf8'));
  });
});
