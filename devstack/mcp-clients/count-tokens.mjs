// Prints how many o200k_base tokens (the encoding of OpenAI's current models) the text on
// standard input holds.
import { Tiktoken } from "js-tiktoken/lite";
import o200k_base from "js-tiktoken/ranks/o200k_base";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const text = Buffer.concat(chunks).toString("utf8");
console.log(new Tiktoken(o200k_base).encode(text).length);
