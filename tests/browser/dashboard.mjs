// Drives `plumbline serve` in real headless Chromium (Debian's package,
// through playwright-core) and checks what a reviewer sees:
//
//   node dashboard.mjs BASE_URL OUT_DIR
//
// BASE_URL serves a store holding server "shop" observed before and after
// a rug pull: tool "add" gained <IMPORTANT> text with a U+200B, and tool
// "notes" gained a description that is an XSS attempt; and server
// "warehouse", whose release changed 28 of its tools. Prints one JSON
// line of findings; exits non-zero, naming the failed check, on any
// failure. Screenshots go to OUT_DIR.
import { chromium } from "playwright-core";

const [base, out] = process.argv.slice(2);
if (!base || !out) {
    console.error("usage: node dashboard.mjs BASE_URL OUT_DIR");
    process.exit(2);
}
const executablePath = process.env.PLUMBLINE_CHROMIUM || "/usr/bin/chromium";

function check(ok, what) {
    if (!ok) {
        throw new Error(`check failed: ${what}`);
    }
}

const browser = await chromium.launch({
    executablePath,
    headless: true,
    // No sandbox user namespaces in containers; nothing but 127.0.0.1 is loaded.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const findings = {};
try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    // Anything leaving 127.0.0.1 (the <img src=x> would resolve to the same
    // origin; a remote URL must never be fetched) fails the test.
    const offsite = [];
    await context.route("**/*", (route) => {
        const url = new URL(route.request().url());
        if (url.hostname !== "127.0.0.1") {
            offsite.push(url.href);
            return route.abort();
        }
        return route.continue();
    });
    const page = await context.newPage();
    const dialogs = [];
    page.on("dialog", async (d) => {
        dialogs.push(d.message());
        await d.dismiss();
    });
    const cspViolations = [];
    page.on("console", (m) => {
        if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });

    // Overview: the rug pull counts as unreviewed, CRITICAL at worst.
    await page.goto(base, { waitUntil: "load" });
    const row = page.locator("table.servers tbody tr", { hasText: "shop" });
    check((await row.count()) === 1, "the overview lists server shop");
    const unreviewedBefore = Number(await row.locator("td.unreviewed").innerText());
    findings.unreviewedBefore = unreviewedBefore;
    check(unreviewedBefore >= 2, `two unreviewed changes, got ${unreviewedBefore}`);
    check((await row.innerText()).includes("CRITICAL"), "the worst unreviewed change is CRITICAL");
    await page.screenshot({ path: `${out}/overview-before.png`, fullPage: true });

    // Server page, then the change to "add".
    await row.locator("a", { hasText: "shop" }).first().click();
    await page.waitForLoadState("load");
    const addLink = page.locator('ul.changes a[href*="/tools/add"]').first();
    check((await addLink.count()) === 1, "the server page links the change to add");
    await addLink.click();
    await page.waitForLoadState("load");
    findings.changeUrl = page.url();

    // The evidence is highlighted in place, and the zero-width space is a
    // visible badge.
    const marks = page.locator("mark.ev");
    check((await marks.count()) > 0, "evidence is highlighted");
    const markText = (await marks.allInnerTexts()).join(" ");
    check(markText.includes("IMPORTANT"), `the highlight covers the <IMPORTANT> block: ${markText}`);
    const badge = page.locator("span.cp", { hasText: "U+200B" }).first();
    check(await badge.isVisible(), "the U+200B badge is visible");
    const box = await badge.boundingBox();
    check(box && box.width > 10 && box.height > 5, "the badge takes up space on screen");
    findings.badge = await badge.innerText();
    const ruleLink = page.locator('a[href^="/rules/"]').first();
    check((await ruleLink.count()) === 1, "a fired rule's explanation is a click away");
    await page.screenshot({ path: `${out}/change.png`, fullPage: true });

    // Accept it into the baseline.
    const form = page.locator("section.review-form form");
    const reviewer = form.locator('input[name="reviewer"]');
    if ((await reviewer.count()) > 0) await reviewer.fill("browser-test");
    await form.locator('button[value="accepted"]').click();
    await page.waitForLoadState("load");
    check(
        (await page.locator("body").innerText()).toLowerCase().includes("accepted"),
        "the change page shows it accepted",
    );

    // The overview counts one unreviewed change fewer.
    await page.goto(base, { waitUntil: "load" });
    const after = Number(
        await page.locator("table.servers tbody tr", { hasText: "shop" }).locator("td.unreviewed").innerText(),
    );
    findings.unreviewedAfter = after;
    check(after === unreviewedBefore - 1, `unreviewed went ${unreviewedBefore} -> ${after}`);
    await page.screenshot({ path: `${out}/overview-after.png`, fullPage: true });

    // The XSS attempt renders as text: no dialog, no injected element.
    const notes = findings.changeUrl.replace(/\/tools\/add$/, "/tools/notes");
    await page.goto(notes, { waitUntil: "load" });
    await page.waitForTimeout(500); // let an onerror handler run, were there one
    const body = await page.locator("main, body").first().innerText();
    check(body.includes("<script>alert(1)</script>"), "the script tag is shown as text");
    check(body.includes("onerror=alert(1)"), "the img tag is shown as text");
    check((await page.locator('img[src="x"]').count()) === 0, "no <img src=x> element exists");
    check((await page.locator("script").count()) === 0, "the page has no script element");
    check(dialogs.length === 0, `no dialog fired, got ${JSON.stringify(dialogs)}`);
    check(offsite.length === 0, `nothing loaded beyond 127.0.0.1: ${offsite}`);
    findings.dialogs = dialogs.length;
    findings.cspViolations = cspViolations.length;
    await page.screenshot({ path: `${out}/xss.png`, fullPage: true });

    // Every remaining change of the observation, reviewed at once: the
    // button leads to a confirmation page, and confirming records them.
    const observation = findings.changeUrl.replace(/\/tools\/add$/, "");
    await page.goto(observation, { waitUntil: "load" });
    await page.screenshot({ path: `${out}/observation.png`, fullPage: true });
    await page.locator('form.review-all button[value="reviewed"]').click();
    await page.waitForLoadState("load");
    check(
        (await page.locator("h1").innerText()).includes("changes of observation"),
        "a confirmation page comes first",
    );
    await page.locator("form.review-form button[type=submit]").click();
    await page.waitForLoadState("load");
    check(page.url().endsWith(observation.replace(/^https?:\/\/[^/]+/, "")), `back on the observation: ${page.url()}`);
    await page.goto(base, { waitUntil: "load" });
    const afterAll = Number(
        await page.locator("table.servers tbody tr", { hasText: "shop" }).locator("td.unreviewed").innerText(),
    );
    findings.unreviewedAfterAll = afterAll;
    check(afterAll === 0, `nothing left to review, got ${afterAll}`);

    // A busy release: server "warehouse" changed 28 of its tools at once.
    await page.locator("table.servers tbody tr", { hasText: "warehouse" }).locator("a", { hasText: "warehouse" }).first().click();
    await page.waitForLoadState("load");
    // Its latest observation: the link with the highest id.
    const observations = await page
        .locator('a[href*="/observations/"]')
        .evaluateAll((links) => links.map((a) => a.getAttribute("href")));
    const latest = observations
        .filter((h) => /\/observations\/\d+$/.test(h))
        .sort((a, b) => Number(b.split("/").pop()) - Number(a.split("/").pop()))[0];
    check(latest, `the server page links its observations: ${observations}`);
    await page.goto(new URL(latest, base).href, { waitUntil: "load" });
    findings.busyChanges = await page.locator("table.changes tbody tr").count();
    check(findings.busyChanges >= 28, `the busy observation lists its changes, got ${findings.busyChanges}: ${await page.locator("table.changes tbody").innerText()}`);
    await page.screenshot({ path: `${out}/observation-busy.png`, fullPage: true });
} finally {
    await browser.close();
}
console.log(JSON.stringify(findings));
