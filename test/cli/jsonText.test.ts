/**
 * A JSON file's syntax error as an editor places it: line and column (1-based), the same on
 * every Node version, including the errors V8 gives no offset for.
 */
import { describe, expect, it } from 'vitest';
import { JsonTextError, parseJsonText, syntaxErrorAt } from '../../src/util/jsonText.js';

function errorOf(text: string): string {
  try {
    parseJsonText(text, 'plan.json');
  } catch (error) {
    expect(error).toBeInstanceOf(JsonTextError);
    return (error as Error).message;
  }
  throw new Error(`parsed: ${text}`);
}

describe('parseJsonText', () => {
  it('parses JSON, a byte order mark dropped', () => {
    expect(parseJsonText('\uFEFF{"a": [1, "x"]}', 'f')).toEqual({ a: [1, 'x'] });
  });

  it('says the line and column where the text stops being JSON, never an offset', () => {
    const cases: [string, string][] = [
      ['{\n  "providers": {\n    "sim": {"type": "sim",}\n  }\n}\n', 'line 3, column 27: Expected double-quoted property name'],
      ['{"a": tru }', 'line 1, column 7: Unexpected token \' \''],
      ['{"runId": "x",\n "status": "compl', 'line 2, column 18: Unterminated string'],
      ['[1,2 x]', "line 1, column 6: Expected ',' or ']' after array element"],
      ['{"a" 1}', "line 1, column 6: Expected ':' after property name"],
      ['{"a":1}}', 'line 1, column 8: Unexpected non-whitespace character after JSON'],
      ['[1,]', "line 1, column 4: Unexpected token ']'"],
      ['\uFEFF[\n\n', 'line 3, column 1: Unexpected end of JSON input'],
      ['', 'line 1, column 1: Unexpected end of JSON input'],
    ];
    for (const [text, where] of cases) expect(errorOf(text)).toBe(`plan.json is not valid JSON: ${where}`);
  });

  it('places an error in a text nested deeper than the call stack', () => {
    expect(syntaxErrorAt(`${'['.repeat(200_000)}1,}`)).toBe(200_002);
    expect(syntaxErrorAt('{"a": [1, {"b": null}], "c": "\\u12G4"}')).toBe(31);
  });
});
