// The fusion decision in words: the search status line, its details and the explain view.

function denseWeight(f) {
  return f.denseWeightUsed === null || f.denseWeightUsed === undefined ? f.denseWeight : f.denseWeightUsed;
}

// The whole decision, for the details on demand.
export function fusionText(f) {
  if (f.method === "rrf") return "RRF (k=" + f.rrfK + ", lexical weight " + f.lexicalWeight + ")";
  if (f.method === "minmax" || f.method === "dbsf" || f.method === "adaptive") {
    let language = "";
    if (f.method === "adaptive" && f.queryLanguage) {
      const covered = f.embedderCoversQuery === true ? "declared by the embedder"
        : f.embedderCoversQuery === false ? "not declared by the embedder" : "embedder languages unknown";
      language = "; query language " + f.queryLanguage + ", " + covered;
    }
    return f.method + " (dense weight " + denseWeight(f) + (f.fusionReason ? ": " + f.fusionReason : "") + language + ")";
  }
  return "weighted (vector " + f.vectorWeight + " / lexical " + f.lexicalScoreWeight + ", threshold " + f.threshold + ")";
}

// The decision as a short phrase for the status line.
export function fusionSentence(f) {
  if (f.method === "rrf") return "RRF, lexical weight " + f.lexicalWeight;
  if (f.method === "weighted") return "weighted sum, dense " + f.vectorWeight + " / lexical " + f.lexicalScoreWeight;
  const w = Math.round(Number(denseWeight(f)) * 100) / 100;
  const lean = w > 0.5 ? "leaning dense" : w < 0.5 ? "leaning lexical" : "both arms equal";
  return f.method + ", " + lean + " (dense weight " + w + ")";
}
