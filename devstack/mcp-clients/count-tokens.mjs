// Prints how many o200k_base tokens (the encoding of OpenAI's current models) the text on
// standard input holds. With --json, standard input is a JSON list of texts and the answer a JSON
// list of their counts, in order.
import { Tiktoken } from "js-tiktoken/lite";
import o200k_base from "js-tiktoken/ranks/o200k_base";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const text = Buffer.concat(chunks).toString("utf8");
const encoder = new Tiktoken(o200k_base);
if (process.argv.includes("--json")) {
  console.log(JSON.stringify(JSON.parse(text).map((one) => encoder.encode(one).length)));
} else {
  console.log(encoder.encode(text).length);
}
