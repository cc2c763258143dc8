// Sharing a lab state: the "Copy link" button, the link options (controls to
// hide for a lesson, an iframe snippet for slides) and the metrics CSV.

function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/**
 * @param {object} o
 * @param {string} o.title  the lab's title (for the iframe's title)
 * @param {(names: Set<string>) => void} o.onHide  the set of hidden controls changed
 * @param {() => {name: string, text: string}} o.csv  the metrics CSV to download now
 */
export function initShare({ title, onHide, csv }) {
  const status = document.getElementById("share-status");
  const urlBox = document.getElementById("share-url");
  const embedBox = document.getElementById("embed-code");
  const say = (text) => { status.textContent = text; };

  function refresh() {
    const href = window.location.href;
    urlBox.value = href;
    const embed = new URL(href);
    embed.searchParams.set("embed", "1");
    embed.searchParams.delete("present");
    embedBox.value = `<iframe src="${embed.href}" title="${title} (Prefill & Decode Lab)" `
      + `width="100%" height="640" style="border:0" loading="lazy"></iframe>`;
  }

  async function copyLink() {
    refresh();
    try {
      // The Clipboard API needs a secure context (https or localhost); a
      // classroom server on a LAN address is neither, so fall back below.
      await navigator.clipboard.writeText(urlBox.value);
      say("Link copied.");
    } catch {
      document.getElementById("share").open = true;
      urlBox.focus();
      urlBox.select();
      say(document.execCommand("copy") ? "Link copied." : "Press Ctrl+C (⌘C) to copy the selected link.");
    }
  }

  document.getElementById("copy-link").addEventListener("click", copyLink);
  document.getElementById("share").addEventListener("toggle", refresh);
  for (const box of [urlBox, embedBox]) box.addEventListener("focus", () => box.select());
  document.querySelectorAll(".hide-toggle").forEach((box) => {
    box.addEventListener("change", () => {
      onHide(new Set([...document.querySelectorAll(".hide-toggle:checked")].map((b) => b.value)));
      say(box.checked ? `“${box.parentElement.textContent.trim()}” is hidden in this link.` : "");
    });
  });
  document.getElementById("download-csv").addEventListener("click", () => {
    const { name, text } = csv();
    saveBlob(new Blob([text], { type: "text/csv;charset=utf-8" }), name);
    say(`Saved ${name}.`);
  });

  return { refresh };
}
